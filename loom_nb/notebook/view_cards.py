"""Where the live view puts gate cards (``ViewCards``, under ``RunView``): a card per open gate, in
its turn's block (approval cards grouped) or below the turns, a sub-agent's in its child's panel; a
resolved gate's card shows the answer, and a decided approval card folds into its tool row.
"""

from __future__ import annotations

from typing import Any

from loom_nb.agent.config import APPROVAL_GATE
from loom_nb.agent.run import Run
from loom_nb.journal import step_ids
from loom_nb.journal.events import EventKind
from loom_nb.journal.run_state import GateState
from loom_nb.notebook.cards import GateCard, card_for
from loom_nb.notebook.child_panel import direct_child
from loom_nb.notebook.formatting import sweep, take_out
from loom_nb.notebook.runs import ensure_registered
from loom_nb.notebook.view_steps import ViewSteps


class ViewCards(ViewSteps):
    """How the live view places, resolves and folds gate cards (``RunView`` builds on it)."""

    def _gate_changed(self, kind: str, gate: GateState) -> None:
        if kind == EventKind.GATE_RESOLVED:
            self._resolutions[gate.gate_id] = (gate.resolution, gate.resolved_at or 0.0)
            card = self.cards.get(gate.gate_id)
            if card is not None:
                card.resolved(gate.resolution, gate.resolved_at or 0.0)
                self._fold(gate.gate_id)
                block = self.blocks.get(self._turn_of(gate.gate_id))
                if block is not None and block.approvals is not None:
                    block.approvals.refresh()
                self._place()
        if kind == EventKind.GATE_OPENED and step_ids.is_question_gate(gate.gate_id):
            # A call asks while the run moves: its card shows once the call waits on it.
            self.run.runtime.questions.when_open(self.run.id, gate.gate_id, self._question_asked)
        is_approval = gate.kind == APPROVAL_GATE and step_ids.parse_step_id(gate.gate_id).kind == step_ids.APPROVAL
        if not is_approval or gate.subject is None:
            return
        if kind == EventKind.GATE_OPENED and isinstance(gate.payload, dict):
            self._row(gate.subject, str(gate.payload.get("tool")), gate.payload.get("arguments"))
        self._refresh_row(gate.subject)

    def _question_asked(self) -> None:
        self._show_gates(self.run)
        self._place()

    def _fold(self, gate_id: str) -> bool:
        """Fold a decided approval card into its tool row (``FoldedCards``): the card is taken out
        and closed, the row says the decision. Returns whether it is folded."""
        card = self.cards.get(gate_id)
        if card is None:
            return False
        subject = step_ids.parse_step_id(gate_id).subject
        return self.folded.fold(gate_id, card, has_row=subject in self.tool_rows, detach=self._detach)

    def _detach(self, card: GateCard) -> None:
        """Take a card out of its turn's block (or of the cards below the turns)."""
        for block in self.blocks.values():
            block.remove_card(card)
        take_out(self.cards_box, card)

    def _sweep_cards(self) -> None:
        """Drop the folded cards kept hidden while cards after them waited (``take_out``): the run
        settled, nothing in the view waits for a person any more."""
        boxes = [self.cards_box, *(p.cards_box for p in self.child_panels.values())]
        for block in self.blocks.values():
            boxes += [block.cards] + ([block.approvals] if block.approvals is not None else [])
        for box in boxes:
            sweep(box)

    def _has_card(self, gate: Any) -> bool:
        cid = direct_child(self.run.id, gate.execution_id)
        if cid is None:
            return bool(gate.gate_id in self.cards)
        panel = self.child_panels.get(cid)
        return panel is not None and (gate.execution_id, gate.gate_id) in panel.cards

    def _show_gates(self, run: Run) -> None:
        gates = [g for g in run.gates if not self._has_card(g)]
        if not gates:
            return
        problem = ensure_registered(run)
        if self.progress.max <= 1 and self._max_turns():
            self._render_progress()
        for gate in gates:
            cid = direct_child(run.id, gate.execution_id)
            if cid is not None:  # a sub-agent's gate: under its tool row, answered in the child
                self.panel(cid).add_card((gate.execution_id, gate.gate_id), card_for(gate, problem=problem))
                continue
            card = self.cards[gate.gate_id] = card_for(gate, problem=problem)
            if gate.gate_id in self._resolutions:
                card.resolved(*self._resolutions[gate.gate_id])
                if self._fold(gate.gate_id):
                    continue
            if step_ids.parse_step_id(gate.gate_id).turn is not None:
                self.block(self._turn_of(gate.gate_id)).add_card(card)
            else:
                self.cards_box.children = (*self.cards_box.children, card)
