"""Learning from imported history: the ChatGPT/Claude import's "Let Hermes learn from this
history" option (off by default).

After the import, a background review reads the export's conversations and proposes what
they show about the person, through the paths the agent's own learning takes:

- memory entries, written by the background reviewer (skills_app.services.review: its
  system prompt and memory prompt, the offline tool loop, the `memory` tool only, as origin
  "import_review" naming the job), so every note passes the threat scanner, the person's
  limits and the audit log, and waits in the approval queue when the person has approval
  mode on; the notes read "Learned from your ChatGPT import of <date>" wherever they are
  shown, and can be listed and removed per import (notes.py);
- with the local memory provider (HERMES_MEMORY_PROVIDER=local, extraction on, the person's
  consent), inferences from the same extractor and validation as after a chat turn
  (memory.inferences.extraction), each with evidence pointing at the imported messages.

Bounded for thousands of conversations (plan.py):

- choose: the conversations with the most of the person's own words — what memory is
  about — each message counted up to USER_CHARS so one pasted document does not win,
  weighed by age (half the weight for each year since the conversation's last message, as
  preferences drift); at most HERMES_IMPORT_LEARN_CONVERSATIONS, none with fewer than
  MIN_USER_CHARS of the person's words;
- read: an excerpt of each — its messages in order, the person's cut to USER_CHARS,
  answers to ANSWER_CHARS, at most a third of a batch;
- batch: the excerpts oldest first (so a later conversation can correct what an older one
  said), packed into batches of HERMES_INFERENCE_TRANSCRIPT_CHARS; a batch costs one
  reviewer run of at most REVIEW_CALLS model calls and one extraction call;
- cap: HERMES_IMPORT_LEARN_MAX_CALLS calls per import: the plan keeps the best
  conversations that fit, and the run stops before a batch that could pass it.

Resumable (run.py): the plan is stored on the job; the run holds the job's lease (kind
`chat_learn`), records its progress after each batch, and each conversation remembers how
far it was read (`Session.model_config["learned_through"]`). A worker killed mid-way is
taken over (a redelivery, or `hermes_site.requeue`) and goes on from the batch it was in,
whose notes, if the dead run saved some, are found already there. A run works for
SLICE_SECONDS, then queues its own continuation, so no task outlives its time limit.
Uploading the export again with the option on reads what is left: conversations not read
yet, and the parts of long ones past their excerpt.
"""

from __future__ import annotations

from .plan import inferences_on, learn_plan, learn_unavailable
from .run import (
    LEARN_KIND,
    LEARN_TASK,
    LEARN_TASK_LIMIT,
    chat_learn_run,
    learn_queue,
    learning_summary,
)

__all__ = [
    "LEARN_KIND",
    "LEARN_TASK",
    "LEARN_TASK_LIMIT",
    "chat_learn_run",
    "inferences_on",
    "learn_queue",
    "learn_plan",
    "learn_unavailable",
    "learning_summary",
]
