"""A turn's texts, as redaction walks them: every string of the turn that is redacted (the
case, the history, the query, the contexts, the answer, the reference, the labels, the
feedback's comment, and every string nested in unknown fields), gathered in one order
(``texts``), and the turn rebuilt with each replaced (``replaced``). Pure.

A model none of whose texts changed is kept, not copied (they are frozen): most of a turn with
something to replace is passages and messages with nothing to replace.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from operator import attrgetter
from typing import Any, TypeVar

from pydantic import BaseModel

from monitor.schema.turn import TurnEvent

M = TypeVar("M", bound=BaseModel)

_content = attrgetter("content")
_text = attrgetter("text")
_extra = attrgetter("__pydantic_extra__")


def texts(turn: TurnEvent) -> list[str]:
    """Every text of the turn that is redacted, in the order ``replaced`` renders them.

    Runs on every consumed turn: a list built in place, the messages' and contexts' texts and
    extras read by ``map`` over attribute getters (a comprehension is a Python call of its own),
    and the extras read from ``__pydantic_extra__`` (``model_extra`` is a property call per
    model)."""
    case = turn.case
    history = turn.history
    contexts = turn.contexts
    feedback = turn.feedback
    found = [case.subject, case.description, case.product or "", case.environment or ""]
    if history:
        found += map(_content, history)
    found.append(turn.query)
    if contexts:
        found += map(_text, contexts)
    found.append(turn.answer)
    found.append(turn.reference or "")
    found += turn.labels.values()
    if feedback is not None:
        found.append(feedback.comment or "")
    if turn.__pydantic_extra__:
        found += _leaves(turn.__pydantic_extra__)
    if case.__pydantic_extra__:
        found += _leaves(case.__pydantic_extra__)
    if feedback is not None and feedback.__pydantic_extra__:
        found += _leaves(feedback.__pydantic_extra__)
    if history and any(map(_extra, history)):
        for message in history:
            if message.__pydantic_extra__:
                found += _leaves(message.__pydantic_extra__)
    if contexts and any(map(_extra, contexts)):
        for context in contexts:
            if context.__pydantic_extra__:
                found += _leaves(context.__pydantic_extra__)
    return found


def replaced(turn: TurnEvent, red: Callable[[str], str]) -> TurnEvent:
    """``turn`` with each of its texts replaced by ``red(text)``, in ``texts``' order."""
    case = _updated(
        turn.case,
        {
            "subject": red(turn.case.subject),
            "description": red(turn.case.description),
            "product": _opt(red, turn.case.product),
            "environment": _opt(red, turn.case.environment),
            **_extras(red, turn.case.model_extra),
        },
    )
    history = [
        _updated(m, {"content": red(m.content), **_extras(red, m.model_extra)})
        for m in turn.history
    ]
    query = red(turn.query)
    contexts = [
        _updated(c, {"text": red(c.text), **_extras(red, c.model_extra)}) for c in turn.contexts
    ]
    answer = red(turn.answer)
    reference = _opt(red, turn.reference)
    feedback = turn.feedback
    if feedback is not None:
        feedback = _updated(
            feedback,
            {
                "comment": _opt(red, feedback.comment),
                **_extras(red, feedback.model_extra),
            },
        )
    return turn.model_copy(
        update={
            "case": case,
            "history": history,
            "query": query,
            "contexts": contexts,
            "answer": answer,
            "reference": reference,
            "labels": {k: red(v) for k, v in turn.labels.items()},
            "feedback": feedback,
            **_extras(red, turn.model_extra),
        }
    )


def _updated(model: M, update: dict[str, Any]) -> M:
    """``model`` with ``update``; ``model`` itself when every value is the one it holds (a
    text with nothing to replace comes back from rendering as the same object)."""
    if all(getattr(model, k) is v for k, v in update.items()):
        return model
    return model.model_copy(update=update)


def _opt(red: Callable[[str], str], text: str | None) -> str | None:
    return None if text is None else red(text)


def _extras(red: Callable[[str], str], extra: Mapping[str, Any] | None) -> dict[str, Any]:
    # Unknown fields are stored with the turn: their strings are redacted like the rest.
    if not extra:
        return {}
    return {k: _deep(red, v) for k, v in extra.items()}


def _deep(red: Callable[[str], str], value: Any) -> Any:
    if isinstance(value, str):
        return red(value)
    if isinstance(value, list):
        return [_deep(red, v) for v in value]
    if isinstance(value, dict):
        return {k: _deep(red, v) for k, v in value.items()}
    return value


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
