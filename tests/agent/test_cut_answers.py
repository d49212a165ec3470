"""An answer the model did not finish (its output token limit, the provider's content filter) is
never a normal finish: ``stop_reason`` says why, the view marks it, and ``when_cut`` finishes,
asks the model to go on, or fails the run (``loom_nb.agent.cut_answers``)."""

from __future__ import annotations

import pytest

import loom_nb as loom
from loom_nb.agent.cut_answers import GO_ON
from loom_nb.errors import AnswerCutError
from loom_nb.messages import ModelRequest, ModelResponse
from loom_nb.notebook.run_view import RunView


def cut(text: str, reason: str = "length") -> ModelResponse:
    return ModelResponse.text(text).model_copy(update={"finish_reason": reason})


def agent(*responses: ModelResponse, **options: object) -> tuple[loom.Agent, loom.ScriptedModel]:
    model = loom.ScriptedModel(list(responses))
    return loom.Agent(model=model, name="writer", **options), model  # type: ignore[arg-type]


def test_a_cut_answer_finishes_with_stop_reason_max_tokens_and_the_view_marks_it() -> None:
    writer, _ = agent(cut("The report begins with"))
    rt = loom.Runtime.open()
    run = writer.start("Write the report", runtime=rt)
    assert run.status == "completed"
    assert run.result is not None
    assert (run.result.stop_reason, run.result.output) == ("max_tokens", "The report begins with")
    view = RunView(run)
    assert "answer (cut off by the model's output token limit): The report begins with" in repr(view)
    assert "loom-cut" in view.answer.value
    rt.close()


def test_a_content_filter_stop_is_content_filter_and_is_never_continued() -> None:
    writer, model = agent(cut("I can tell you that", "content_filter"), when_cut="continue")
    rt = loom.Runtime.open()
    run = writer.start("Tell me", runtime=rt)
    assert run.result is not None and run.result.stop_reason == "content_filter"
    assert model.calls == 1
    assert "stopped by the provider's content filter" in repr(RunView(run))
    rt.close()


def test_continue_asks_the_model_to_go_on_and_joins_the_parts_and_replays() -> None:
    writer, model = agent(cut("Part one, "), cut("part two, "), ModelResponse.text("part three."), when_cut="continue")
    rt = loom.Runtime.open()
    run = writer.start("Write it all", runtime=rt)
    assert run.result is not None
    assert (run.result.output, run.result.stop_reason, run.result.turns) == (
        "Part one, part two, part three.",
        "end_turn",
        3,
    )
    requests: list[ModelRequest] = [r for r in model.history]
    assert [m.text for m in requests[1].messages[-2:]] == ["Part one, ", GO_ON.text]
    report = rt.replay_sync(run.id)
    assert report.reproduced, report.message
    rt.close()


def test_continue_stops_at_max_turns_with_what_came() -> None:
    writer, model = agent(cut("One, "), cut("two, "), when_cut="continue", max_turns=2)
    rt = loom.Runtime.open()
    run = writer.start("Count", runtime=rt)
    assert run.result is not None
    assert (run.result.output, run.result.stop_reason, model.calls) == ("One, two, ", "max_tokens", 2)
    rt.close()


def test_fail_fails_the_run_with_a_typed_error_naming_the_step_and_the_fix() -> None:
    writer, _ = agent(cut("Half an"), when_cut="fail")
    rt = loom.Runtime.open()
    run = writer.start("Write", runtime=rt)
    assert run.status == "failed"
    exc = run.exception()
    assert isinstance(exc, AnswerCutError)
    assert "'#turn:0'" in str(exc) and "max_tokens" in str(exc) and "when_cut='continue'" in str(exc)
    rt.close()


def test_an_unknown_when_cut_is_refused_up_front() -> None:
    with pytest.raises(loom.UsageError, match=r"when_cut must be one of finish, continue, fail, got 'retry'"):
        agent(ModelResponse.text("x"), when_cut="retry")
