"""Every public name of ``kafkalog`` (its ``__all__``) and every public method, property and
attribute its classes define carries a docstring (what ``help()`` shows), as pydantic-core's API
does. The Rust classes get theirs from the PyO3 doc comments in ``rust/src/python/``."""

import inspect

import kafkalog
import kafkalog.results


def _missing(module) -> list[str]:
    missing = []
    for name in module.__all__:
        obj = getattr(module, name)
        if not (inspect.isclass(obj) or inspect.isroutine(obj)):
            continue  # constants and Literal aliases (EARLIEST_TIMESTAMP, Isolation ...): no __doc__ of their own
        if not (obj.__doc__ or "").strip():
            missing.append(name)
        elif inspect.isclass(obj) and obj.__doc__ == type.__doc__:
            missing.append(name)  # a PyO3 class without a doc comment inherits type's
        if not inspect.isclass(obj):
            continue
        for attr, value in vars(obj).items():
            if attr.startswith("_"):
                continue  # dunders (the constructor is documented on the class, as PyO3 does)
            doc = getattr(value, "__doc__", None)
            # A named tuple's field says "Alias for field number N" unless given a docstring.
            if not (doc or "").strip() or doc.startswith("Alias for field number"):
                missing.append(f"{name}.{attr}")
    return missing


def test_every_public_name_of_kafkalog_has_a_docstring():
    assert _missing(kafkalog) == []


def test_every_typed_result_has_a_docstring():
    assert _missing(kafkalog.results) == []


def test_the_check_sees_a_missing_docstring():
    """The check itself fails on an undocumented method (it cannot pass vacuously)."""

    class Undocumented:
        """A class."""

        def method(self):
            pass

    import types

    fake = types.SimpleNamespace(__all__=["Undocumented"], Undocumented=Undocumented)
    assert _missing(fake) == ["Undocumented.method"]
    assert len(kafkalog.__all__) > 30
