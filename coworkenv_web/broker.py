"""The local mode's filesystem broker, with messages written atomically.

kombu's filesystem transport creates a message file and then writes into it, while a worker
polling the folder may take (move and read) the file in between: it reads an empty file,
fails to decode it and the worker stops ("Unrecoverable error: JSONDecodeError"), with the
message lost. Here a message is written under a name no worker picks up, then renamed into
place, which is atomic within the folder.
"""

import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + ".partial"  # ".partial" names match no queue, so no worker takes it
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
