"""Which validation rows a supervised job evaluates on: a text job leaves image rows out."""

from apps.training.eval_rows import evaluation_rows

TEXT = {"messages": [{"role": "user", "content": "Hi"}]}
IMAGE = {"messages": [{"role": "user", "content": "Look"}], "images": ["/data/a.png"]}


def test_text_training_rows_leave_image_validation_rows_out():
    kept, note = evaluation_rows([TEXT], [IMAGE, TEXT, IMAGE], "Qwen/Qwen2.5-0.5B")
    assert kept == [TEXT]
    assert note == (
        "2 of 3 validation rows show images and no training row does: they are left out of "
        "evaluation (a text model cannot read them)."
    )


def test_a_validation_split_of_images_only_says_what_to_change():
    kept, note = evaluation_rows([TEXT], [IMAGE], "preset:tiny-qwen2")
    assert kept == []
    assert note.startswith("1 of 1 validation rows show images")
    assert "no eval loss" in note and "rebuild the version with text rows in validation" in note


def test_vision_jobs_and_text_splits_keep_every_row():
    assert evaluation_rows([IMAGE], [IMAGE, TEXT], "some/vlm") == ([IMAGE, TEXT], "")
    assert evaluation_rows([TEXT], [IMAGE], "preset:tiny-llava") == ([IMAGE], "")
    assert evaluation_rows([TEXT], [TEXT], "preset:tiny-qwen2") == ([TEXT], "")
    assert evaluation_rows([TEXT], [], "preset:tiny-qwen2") == ([], "")
