"""Benchmarks in and out: Claw-Eval task directories (export and import) and ClawMark
``task.py`` files (export). Builders here turn a canonical environment document into files
(and back); the services in ``apps.environments.services.interop`` store and serve them."""
