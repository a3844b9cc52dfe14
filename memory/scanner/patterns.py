"""The threat scanner's patterns: Hermes' 36 (ids, scopes and semantics kept as Hermes has
them) and this project's additions for vectors Hermes' list lets through (chat-template
tokens, "disregard the above", Markdown exfiltration, pipe-to-shell, …).

Patterns run on the normalised text (see unicode.py), case-insensitively.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

Scope = Literal["all", "context", "strict"]

# Scopes nest: a caller asking for "strict" also gets every "context" and "all" pattern.
# The tuple order is the nesting order, so a pattern applies when its rank <= the requested rank.
SCOPES: tuple[Scope, ...] = get_args(Scope)
SCOPE_RANK: dict[str, int] = {name: rank for rank, name in enumerate(SCOPES)}


@dataclass(frozen=True, slots=True)
class ThreatPattern:
    id: str
    scope: Scope
    regex: re.Pattern[str]
    #: What the pattern catches, in the error message; empty for Hermes' own patterns, whose
    #: messages are kept word for word.
    description: str = ""


# Attackers pad phrases with filler ("ignore ALL of the previous instructions"), so most
# patterns allow a short run of words between their keywords. The run is capped at eight
# words so ordinary prose with the keywords far apart is not flagged, and it is lazy with a
# fixed upper bound so matching stays linear in the number of keyword hits.
_GAP = r"\s+(?:\S+\s+){0,8}?"

# Verbs shared by the two "tamper with agent configuration" patterns.
_EDIT_VERBS = r"(?:update|modify|edit|write|change|append|add)"

# `$HOME`, `${HOME}` and `~` all name the same directory in the shells agents drive.
_HOME = r"(?:\$\{?HOME\}?|~)"

# Only variable names that end in a credential-ish word; the trailing \b rejects names such as
# API_KEY_ID that merely contain one.
_SECRET_VAR = r"\$\{?[A-Za-z0-9_]*?(?:KEY|TOKEN|SECRET|PASSWORD|CREDENTIALS?)\b"


def _p(pattern_id: str, scope: Scope, pattern: str, description: str = "") -> ThreatPattern:
    return ThreatPattern(pattern_id, scope, re.compile(pattern, re.IGNORECASE), description)


HERMES_PATTERNS: tuple[ThreatPattern, ...] = (
    # --- scope "all": unambiguous payloads, checked wherever untrusted text is accepted ---
    _p(
        "prompt_injection",
        "all",
        rf"\bignore{_GAP}(?:previous|all|above|prior){_GAP}instructions\b",
    ),
    _p("sys_prompt_override", "all", r"\bsystem\s+prompt\s+override\b"),
    _p(
        "disregard_rules",
        "all",
        rf"\bdisregard{_GAP}(?:your|all|any){_GAP}(?:instructions|rules|guidelines)\b",
    ),
    _p(
        "bypass_restrictions",
        "all",
        rf"\bact\s+as\s+(?:if|though){_GAP}you"
        rf"{_GAP}(?:have\s+no|(?:don['\u2019]?t|do\s+not)\s+have)"
        rf"{_GAP}(?:restrictions|limits|rules)\b",
    ),
    # Every span stops at the next "<!--": otherwise a flood of unclosed openers makes each
    # one rescan the rest of the text (quadratic). Comments do not nest, so a second opener is
    # still comment body; it is accepted as the end of the match, which keeps one payload
    # shape caught ("<!-- system: ... <!-- -->") at the price of also flagging a keyword
    # between two openers when no closer follows at all. The atomic group commits to the
    # first keyword: a later one would end at the same terminator.
    _p(
        "html_comment_injection",
        "all",
        r"<!--(?>(?:(?!-->|<!--)[\s\S])*?\b(?:ignore|override|system|secret|hidden)\b)"
        r"(?:(?!-->|<!--)[\s\S])*+(?:-->|<!--)",
    ),
    # Stopping at the next "<div" keeps unclosed tags linear; that div is tried on its own.
    _p(
        "hidden_div",
        "all",
        r"<div\b(?:(?!<div\b)[^>])*?\bstyle\s*=\s*[\"'][^\"'>]*?display\s*:\s*none\b",
    ),
    _p(
        "translate_execute",
        "all",
        rf"\btranslate{_GAP}into\s+\S+\s+and\s+(?:execute|run|eval)\b",
    ),
    _p(
        "deception_hide",
        "all",
        rf"\b(?:do\s+not|don['\u2019]?t){_GAP}tell{_GAP}the\s+user\b",
    ),
    # Confined to one line: a shell command that interpolates a secret into a request. The
    # span stops at the next curl/wget, which is tried on its own, so a line of repeated
    # commands is scanned once instead of once per command.
    _p("exfil_curl", "all", rf"\bcurl\b(?:(?!\bcurl\b)[^\n])*?{_SECRET_VAR}"),
    _p("exfil_wget", "all", rf"\bwget\b(?:(?!\bwget\b)[^\n])*?{_SECRET_VAR}"),
    # The file name is usually the tail of a path (~/.aws/credentials), hence the \S*? prefix.
    _p(
        "read_secrets",
        "all",
        r"\bcat\s+(?:\S+\s+){0,8}?\S*?"
        r"(?:\.env|credentials|\.netrc|\.pgpass|\.npmrc|\.pypirc)\b",
    ),
    # --- scope "context": identity and C2 phrasing that is suspicious in always-on context ---
    # Requiring an article after "now" is what lets "You are now ready to ..." through.
    _p(
        "role_hijack",
        "context",
        rf"\byou(?:\s+are|['\u2019]re){_GAP}now\s+(?:a|an|the)\b",
    ),
    _p(
        "role_pretend",
        "context",
        rf"\bpretend{_GAP}(?:you\s+are|you['\u2019]re|to\s+be)\b",
    ),
    _p(
        "leak_system_prompt",
        "context",
        rf"\boutput{_GAP}(?:system|initial)\s+prompt\b",
    ),
    _p(
        "remove_filters",
        "context",
        rf"\b(?:respond|answer|reply)\s+without{_GAP}"
        r"(?:restrictions|limitations|filters|safety)\b",
    ),
    _p(
        "fake_update",
        "context",
        rf"\byou\s+have\s+been{_GAP}(?:updated|upgraded|patched)\s+to\b",
    ),
    _p("identity_override", "context", r"\bname\s+yourself\s+\S+"),
    _p("c2_node_registration", "context", r"\bregister\s+(?:as\s+)?a\s+node\b"),
    _p("c2_heartbeat", "context", r"\b(?:heartbeat|beacon|check-in)\s+(?:to|with)\b"),
    _p("c2_task_pull", "context", r"\bpull\s+(?:down\s+)?(?:new\s+)?tasks?\b"),
    _p("c2_network_connect", "context", r"\bconnect\s+to\s+the\s+network\b"),
    _p(
        "forced_action",
        "context",
        r"\byou\s+must\s+(?:\S+\s+){0,3}?(?:register|connect|report|beacon)\b",
    ),
    _p("anti_forensic_oneliner", "context", r"\bonly\s+use\s+one[\s-]?liners?\b"),
    _p(
        "anti_forensic_disk",
        "context",
        rf"\bnever{_GAP}(?:create|write){_GAP}(?:script|file)s?{_GAP}disk\b",
    ),
    # Options and other variable names may precede the agent one on the same command line.
    _p(
        "env_var_unset_agent",
        "context",
        r"\bunset\s+(?:-[A-Za-z]+\s+)*(?:[A-Za-z_][A-Za-z0-9_]*[ \t]+){0,8}?"
        r"[A-Za-z0-9_]*(?:CLAUDE|CODEX|HERMES|AGENT|OPENAI|ANTHROPIC)",
    ),
    _p(
        "known_c2_framework",
        "context",
        r"\b(?:cobalt\s*strike|sliver|havoc|mythic|metasploit|brainworm)\b",
    ),
    _p(
        "c2_explicit",
        "context",
        r"\bc2[\s_-]*(?:server|channel|infrastructure|beacon)s?\b",
    ),
    _p("c2_explicit_long", "context", r"\bcommand[\s-]+(?:and|&)[\s-]+control\b"),
    # --- scope "strict": also blocks legitimate-looking asks; used for memory/skill writes ---
    _p(
        "send_to_url",
        "strict",
        rf"\b(?:send|post|upload|transmit){_GAP}(?:to|at)\s+https?://",
    ),
    _p(
        "context_exfil",
        "strict",
        rf"\b(?:include|output|print|share){_GAP}"
        r"(?:conversations?|chat\s+history|previous\s+messages|(?:full|entire)\s+context)\b",
    ),
    _p("ssh_backdoor", "strict", r"authorized_keys"),
    _p("ssh_access", "strict", rf"{_HOME}/\.ssh\b"),
    _p("hermes_env", "strict", rf"{_HOME}/\.hermes/\.env\b"),
    _p(
        "agent_config_mod",
        "strict",
        rf"\b{_EDIT_VERBS}{_GAP}\S*?(?:AGENTS\.md|CLAUDE\.md|\.cursorrules|\.clinerules)\b",
    ),
    _p(
        "hermes_config_mod",
        "strict",
        rf"\b{_EDIT_VERBS}{_GAP}\S*?\.hermes/(?:config\.yaml|SOUL\.md)\b",
    ),
    # No leading \b so prefixed names such as GITHUB_TOKEN or db_password are caught too.
    _p(
        "hardcoded_secret",
        "strict",
        r"(?:api[_-]?key|token|secret|password)\s*[=:]\s*[\"'][A-Za-z0-9+/=_-]{20,}",
    ),
)

# --- this project's additions (issue 15): vectors Hermes' list lets through --------------

# Words that name the model's standing instructions. Alone after a verb only the unambiguous
# ones count ("ignore prompts to update macOS" is an ordinary note).
_RULES = (
    r"(?:instructions?|rules|guidelines|directives?|prompts?|programming|constraints|"
    r"restrictions|guardrails|polic(?:y|ies)|training|filters|safeguards|system\s+message)"
)
_STRONG_RULES = r"(?:instructions|guidelines|directives|programming|guardrails|safeguards)"
_OLD = (
    r"(?:previous|prior|earlier|above|preceding|initial|original|system|safety|built-?in|"
    r"developer|hidden|ethical|all)"
)
_OLDS = rf"(?:{_OLD}[\s,]+(?:and\s+)?)"
# A host, then anything up to the end of a Markdown link target or a quoted HTML attribute.
_URL = r"https?://[^\s)\"'>]+"
# Placeholders a model fills in before it renders the URL: {x}, {{x}}, $X, ${X}, <x>, [X].
_INTERPOLATION = (
    r"(?:\{\{?[^}\n]{1,40}\}?\}|%7[bB]|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|"
    r"<[A-Za-z_][A-Za-z_ ]{1,40}>|\[[A-Z][A-Z_ ]{2,40}\])"
)
# What an exfiltration instruction asks to send away.
_SENSITIVE = (
    r"(?:(?:the\s+)?(?:user['\u2019]?s?\s+|all\s+(?:the\s+|of\s+the\s+)?|your\s+|my\s+)?"
    r"(?:conversations?|chat(?:\s+(?:history|logs?|transcripts?))|memor(?:y|ies)|"
    r"secrets?|passwords?|credentials|api[\s_-]?keys?|access\s+tokens?|tokens|"
    r"system\s+prompt|previous\s+messages|personal\s+(?:data|information|details)|"
    r"private\s+(?:data|information|keys?)|ssh\s+keys?|cookies|session\s+ids?|"
    r"(?:e-?mail|contact)\s+(?:addresses|list)))"
)
_DOWNLOADER = r"(?:curl|wget|iwr|irm|invoke-webrequest|invoke-restmethod|fetch)"
_SHELL = (
    r"(?:sudo\s+(?:-\w+\s+)*)?(?:/usr)?(?:/bin/)?(?:(?:ba|z|da|k|fi|c|tc)?sh\b|"
    r"(?:python[0-9.]*|perl|ruby|node)(?:\s+-)?\s*(?:$|[\n;&)]))"
)

EXTRA_PATTERNS: tuple[ThreatPattern, ...] = (
    _p(
        "override_instructions",
        "all",
        r"\b(?:ignore|disregard|forget|override|overrule|bypass|abandon|discard|circumvent)\s+"
        r"(?:(?:all|any|every|each)(?:\s+one)?\s+(?:of\s+)?)?"
        rf"(?:(?:(?:your|my|these|those|its|their)\s+|the\s+(?={_OLD}))"
        rf"{_OLDS}{{0,3}}{_RULES}|{_OLDS}{{1,3}}{_RULES}|{_STRONG_RULES})\b",
        "an instruction to drop the model's instructions or rules",
    ),
    # The same order in the languages people here write notes in (Chinese, then a few
    # European ones): "忽略之前的所有指令", "ignorez les instructions précédentes".
    _p(
        "override_instructions_i18n",
        "all",
        r"(?:忽略|无视|無視|忘记|忘記|忘掉|不要理会|不用管|跳过|绕过|繞過)[掉了]?[你您]?的?"
        r"(?:之前|以前|先前|上面|以上|前面|上述|原来|原有|原始|系统|所有|全部|一切)[^。！\n]{0,8}?"
        r"(?:指令|指示|规则|規則|说明|設定|设定|限制|要求|提示词|安全规则)"
        r"|\bignorez?\s+(?:toutes?\s+)?(?:les\s+|vos\s+)?(?:instructions|consignes|règles)"
        r"\s+(?:précédentes|antérieures|ci-dessus)"
        r"|\bignorier(?:e|en)?\s+(?:alle\s+)?(?:vorherigen|bisherigen|obigen|deine)\s+"
        r"(?:Anweisungen|Instruktionen|Regeln)"
        r"|\bignora\s+(?:todas\s+)?(?:las\s+)?(?:instrucciones|reglas)\s+(?:anteriores|previas)",
        "an instruction to drop the model's instructions or rules",
    ),
    _p(
        "disregard_above",
        "all",
        r"\b(?:ignore|disregard|forget|override|discard)\s+"
        r"(?:(?:all|everything|anything|any|each)\s+(?:of\s+)?)?(?:what(?:'s|\s+is|\s+was)\s+)?"
        r"(?:(?:the|that|this|your)\s+)?(?:(?:text|content|stuff|messages?|said)\s+)?"
        r"(?:above|foregoing|preceding|before\s+this|so\s+far|up\s+to\s+(?:now|here))\b"
        r"|\bforget\s+(?:everything|all)\s+(?:you\s+(?:were|have\s+been|know|learned)|"
        r"(?:you\s+)?(?:was|were)\s+told)",
        '"disregard the above"-style override',
    ),
    _p(
        "chat_template_token",
        "all",
        r"<\|\s*(?:im_start|im_end|im_sep|system|user|assistant|endoftext|end_of_text|eot_id|"
        r"eom_id|start_header_id|end_header_id|begin_of_text|start|end|message|channel|"
        r"return|call|constrain|tool|ipython|fim_\w+|endofprompt)\s*\|>"
        r"|\[/?INST\]|<</?SYS>>|\[/?SYSTEM(?:_PROMPT)?\]|</?(?:start|end)_of_turn>"
        r"|<\s*/?\s*(?:system|sys|system_prompt|system-prompt)\s*>"
        r"|(?:^|\n)\s*(?:#{1,3}\s*)?(?:system|developer)\s*(?:message|prompt|override|"
        r"instructions?)\s*:"
        r"|\n\s*(?:Human|Assistant|User|System)\s*:\s*\S[^\n]*\n\s*(?:Human|Assistant|System)"
        r"\s*:",
        "a chat-template token or role marker",
    ),
    _p(
        "fake_authority",
        "all",
        r"(?:^|[\[(<*#\n]|\b(?:important|urgent|attention|note)\s*[:!-]\s*)\s*"
        r"(?:new|updated|real|actual|true|hidden|secret|priority|override|admin|system|"
        r"developer|root|official)\s+(?:system\s+)?(?:instructions?|directives?|orders?|"
        r"message|notice|prompt|override|command)s?\s*[:\])>]"
        r"|\b(?:end|begin|start)\s+(?:of\s+)?(?:the\s+)?(?:system|user|assistant|developer)\s+"
        r"(?:prompt|message|instructions?|input)\b"
        r"|\b(?:note|message|instructions?|reminder)\s+(?:to|for)\s+(?:the\s+|any\s+)?"
        r"(?:ai|llm|assistant|language\s+model|chatbot|agent|model)s?\s*[:,-]"
        r"|\bif\s+you\s+are\s+(?:an?\s+)?(?:ai|llm|(?:large\s+)?language\s+model|"
        r"ai\s+assistant|chatbot|automated\s+agent)\b",
        "text posing as system or developer instructions",
    ),
    _p(
        "jailbreak_persona",
        "all",
        r"\b(?:do\s+anything\s+now|dan\s+mode|developer\s+mode\s+(?:enabled|output|on)|"
        r"jailbr(?:oken|eak)\s+mode|(?:unfiltered|uncensored|unrestricted|unaligned)\s+"
        r"(?:ai|mode|model|assistant|version|persona)|evil\s+(?:confidant|twin|mode)|"
        r"no\s+(?:ethical|moral)\s+(?:guidelines|restrictions|limits|constraints)|"
        r"without\s+(?:any\s+)?(?:ethical|moral)\s+(?:guidelines|restrictions|limits|"
        r"constraints))\b"
        r"|\byou(?:\s+are|['\u2019]re)\s+no\s+longer\s+(?:an?\s+)?(?:ai|assistant|bound|restricted|"
        r"limited|chatgpt|claude|hermes|required)\b",
        "a jailbreak persona",
    ),
    _p(
        "reveal_prompt",
        "all",
        r"\b(?:reveal|leak|dump|disclose|recite|repeat|spell\s+out|tell\s+me)\s+"
        r"(?:to\s+me\s+|me\s+|us\s+)?(?:all\s+)?(?:of\s+)?(?:your|the)\s+"
        r"(?:full\s+|entire\s+|exact\s+|complete\s+|verbatim\s+)?"
        r"(?:(?:system|initial|hidden|original|secret|internal|developer|pre-?)\s*){1,3}"
        r"(?:prompt|instructions|message|rules|configuration)\b"
        r"|\b(?:show|print|display|copy|paste|write\s+out|what\s+(?:is|are|was|were))\s+"
        r"(?:me\s+|us\s+)?(?:all\s+)?(?:of\s+)?your\s+(?:full\s+|entire\s+|exact\s+|"
        r"complete\s+|verbatim\s+)?(?:(?:system|initial|hidden|original|secret|internal|"
        r"developer)\s*){1,3}(?:prompt|instructions|message|rules|configuration)\b"
        r"|\b(?:repeat|print|output)\s+(?:the\s+)?(?:words|text|everything)\s+above\b",
        "a request to reveal the system prompt",
    ),
    _p(
        "markdown_exfil",
        "all",
        # An image fetches its URL by itself the moment it renders; a link once clicked. Either
        # carries data away when its URL holds a placeholder the model fills in, or a long
        # opaque value in its query.
        rf"!?\[[^\]\n]{{0,200}}\]\(\s*<?{_URL}?(?:{_INTERPOLATION})"
        r"|!?\[[^\]\n]{0,200}\]\(\s*<?https?://[^\s)?#]+[?#][^\s)]*?="
        r"[A-Za-z0-9+/_%-]{32,}={0,2}"
        rf"|<img\b[^>]*?\bsrc\s*=\s*[\"']?{_URL}?(?:{_INTERPOLATION})"
        r"|\b(?:image|markdown|link|url|img|pixel)s?\b[^\n]{0,80}?\b(?:contains|containing|"
        r"append(?:s|ing|ed)?|encod(?:e|es|ed|ing)|carr(?:y|ies|ying)|embedding|with\s+(?:the\s+)?"
        r"(?:query|param(?:eter)?s?)\s+(?:set\s+to|containing|holding))\b[^\n]{0,40}?"
        rf"\b{_SENSITIVE}\b",
        "a Markdown image or link that carries data to another host",
    ),
    _p(
        "exfil_data",
        "strict",
        r"\b(?:send|forward|e-?mail|mail|post|upload|transmit|leak|exfiltrate|beam|relay|"
        r"submit)\b[^\n]{0,40}?"
        rf"\b{_SENSITIVE}\b[^\n]{{0,60}}?\b(?:to|into|at|via|using|through)\s+"
        r"(?:the\s+|a\s+|this\s+|my\s+|our\s+)?(?:https?://|[\w.+-]+@[\w-]+\.\w|"
        r"(?:url|link|image|webhook|endpoint|server|query\s+string|pastebin|"
        r"remote|external|attacker|collector|discord|telegram)\b)",
        "an instruction to send private data somewhere",
    ),
    _p(
        "pipe_to_shell",
        "all",
        # Each span stops at the next downloader (tried on its own): linear on repeats.
        rf"\b{_DOWNLOADER}\b(?:(?!\b{_DOWNLOADER}\b)[^\n|])*\|\s*{_SHELL}"
        rf"|\b(?:ba|z|da)?sh\s+(?:-c\s+)?[\"']?(?:<\(|\$\()\s*{_DOWNLOADER}\b"
        r"|\b(?:base64|b64)\s+(?:-d|--decode|-D)\b(?:(?!\bbase64\b)[^\n|])*\|\s*"
        r"(?:sudo\s+)?(?:ba|z|da)?sh\b"
        r"|\b(?:iex|invoke-expression)\b\s*\(?\s*(?:\(?\s*new-object\s+net\.webclient|"
        r"iwr|irm|invoke-webrequest|invoke-restmethod)"
        r"|\beval\s*\(\s*(?:atob|base64_decode|decodeURIComponent|unescape)\s*\(",
        "a download piped straight into a shell",
    ),
    _p(
        "reverse_shell",
        "all",
        r"\bnc(?:at)?\s+(?:-\w+\s+)*-e\s+/bin/(?:ba)?sh\b|/dev/tcp/[\w.-]+/\d+"
        r"|\bbash\s+-i\s+>&|\bmkfifo\b(?:(?!\bmkfifo\b)[^\n|])*\|\s*(?:/usr)?(?:/bin/)?(?:ba)?sh\b[^\n|]*\|\s*nc\b",
        "a reverse shell",
    ),
)
