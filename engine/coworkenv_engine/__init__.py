"""The CoworkEnv environment engine (pure Python; see README.md for the public API)."""

from .problems import Problem, SpecError
from .spec import SCHEMA_ID, EnvironmentSpec, canonical_dump, canonical_json, load_spec, spec_hash

__all__ = [
    "SCHEMA_ID",
    "EnvironmentSpec",
    "Problem",
    "SpecError",
    "canonical_dump",
    "canonical_json",
    "load_spec",
    "spec_hash",
]
