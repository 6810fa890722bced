"""SQL for decisions (reads through `DECISIONS`)."""

from control.models import Decision
from control.repository import Repository

DECISIONS = Repository(Decision, "decision")
