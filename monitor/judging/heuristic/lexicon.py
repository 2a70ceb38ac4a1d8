"""The heuristic judge's word lists and phrase patterns: what text says, not what it means.

Stopwords, support-speak, action verbs and the regular expressions that spot questions,
"not enough information" replies, explanations, acknowledged and tried steps and the kind of
answer a query asks for. Kept apart from the rules that use them
(``monitor.judging.heuristic.evidence``) so that vocabulary changes are reviewed as such.
Precompiled patterns and frozen sets only: no I/O, no state.
"""

from __future__ import annotations

import re

WORD = re.compile(r"[a-z0-9]+")
STOPWORD_TEXT = (
    "a an the and or but if then than so of to in on at by for with from into onto over under"
    " about after before as is are was were be been being am do does did done doing have has"
    " had having i me my we our us you your yours he she it its they them their this that"
    " these those there here what which who whom whose when where why how can could would"
    " should will shall may might must not no nor only own same too very just also any all"
    " each every some such more most other both few via per up down out off again once while"
    " let lets please thanks thank hi hello ok okay yes yeah sure one two now new"
)
STOPWORDS = frozenset(STOPWORD_TEXT.split())
# Support-speak that says nothing about the case; kept out of key terms and support checks.
GENERIC_WORDS = (
    "fix issue problem error fail failed failing failure help still try tried trying next"
    " work working get getting see seeing know need want like anything else something thing"
    " step run ran running check sure make follow following below above command information"
    " enough retrieved article answer question detail share output confirm tell look seem"
    " happen start stop use way time case current possible sorry unable recommend suggest"
    " first then last line able contact support further assistance team already take"
    " different weird strange odd hmm idea behave behaving acting morning today yesterday"
    " wrong broken stuff happened product message changed right exact"
)

SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9`(\"'])|\n+")
LIST_MARK = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+")
LEAD_IN = re.compile(r"^(?:first|then|next|finally|after that|afterwards|also|now),?\s+", re.I)
QUESTION = re.compile(
    r"\?\s*$|^(?:could|can|would|will|do|does|did|is|are|which|what|when|where|how)\b", re.I
)
INSUFFICIENT = re.compile(
    r"(?:(?:\bnot|n't) (?:have )?(?:enough|sufficient) (?:information|detail|context|evidence)"
    r"|insufficient (?:information|detail|context|evidence)|unable to (?:determine|answer|find)"
    r"|cannot (?:determine|answer|find)|can't (?:determine|answer|find)"
    r"|(?:articles?|documents?|context) (?:I (?:found|retrieved) )?(?:do(?:es)? not|don't|doesn't)"
    r" (?:cover|mention|include|describe|list))",
    re.I,
)
EXPLAINS = re.compile(
    r"\b(?:because|caused by|cause[sd]? |due to|means that|means |happens when|occurs when"
    r"|results? (?:from|in)|the reason|this is why|which is why|so that|since the)\b",
    re.I,
)
ACK = re.compile(
    r"\b(?:already|since you|you've|you have|as you (?:said|mentioned)|skip|instead of"
    r"|no need to|did not (?:clear|help|fix)|didn't (?:clear|help|fix))\b",
    re.I,
)
TRIED = re.compile(
    r"\b(?:already|tried|did not help|didn't help|does not help|doesn't help|no luck"
    r"|no change|without success|to no avail|as suggested|still (?:fails|failing|get|see|the)"
    r"|i ran|we ran|i did|we did|(?:i|we)(?: have|'ve)?(?: also)? \w+ed)\b",
    re.I,
)
BACK_REFERENCE = re.compile(
    r"\b(?:as suggested|those|these|the steps|your steps|the above|that didn't|that did not)\b",
    re.I,
)
WHY = re.compile(
    r"^\s*(?:why|what (?:is|does|causes?|are|'s|happened)|what's|explain|how come"
    r"|is it (?:safe|normal|expected)|does this mean)\b|\bwhy\b|\bdifference between\b",
    re.I,
)
HOWTO = re.compile(
    r"\b(?:how (?:do|can|should|to)|what should|what (?:else|next)|next step|steps?\b"
    r"|fix|resolve|recover|get (?:it|this) working|can't|cannot|fails?|failing|error)\b",
    re.I,
)
VAGUE = re.compile(
    r"\b(?:something|different|weird|strange|odd|not sure|it's|it is|now what|any ideas"
    r"|doing|acting|same thing|this thing)\b",
    re.I,
)
# Verbs that start a troubleshooting step ("Restart the agent", "re-run the job").
ACTION_VERB_WORDS = (
    "run rerun restart reboot check verify open go navigate set enable disable update upgrade"
    " install reinstall remove delete clear confirm collect review ensure increase reduce apply"
    " enter reenter reset rotate renew add edit change stop start mount unmount remount rescan"
    " power cycle reseat replace select click sign assign export import flush resync sync"
    " rejoin login purge unlock lock expire move test retry upload resend send list show inspect"
    " compare wait schedule attach raise lower patch reload roll register unlink revoke reclaim"
    " request throttle rebuild redeliver reimport rediscover disconnect reconnect rollback"
)
CODE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)

# ---------------------------------------------------------------- workflow constraints
# What the user says was done or failed ("purged it, same error", "made no difference").
DONE = re.compile(
    r"\b(?:made no difference|no difference|same (?:error|failure|result|thing|problem|message)"
    r"|did nothing|did(?:n't| not) change|still (?:not|no)\b)|^\s*[a-z]+ed\b",
    re.I,
)
# What the user says cannot or may not be done ("restarting is not an option").
REFUSED = re.compile(
    r"\b(?:not an option|not possible|impossible|out of the question|no way to"
    r"|(?:won't|will not|doesn't|does not|don't|do not) (?:allow|let us|permit|accept)"
    r"|not allowed|(?:we|i)\s+(?:\w+\s+)?(?:can't|cannot|can not|mustn't|must not) \w+"
    r"|no longer exists?"
    r"|(?:was|were|has been|have been) deleted|(?:isn't|is not|aren't|are not) available)\b",
    re.I,
)
# "Purged it exactly like that": the step is the one the assistant gave before.
BACK_REFERENCE_MORE = re.compile(
    r"\b(?:like (?:that|this|you said)|as you (?:said|suggested)|exactly|did that|done that"
    r"|tried that|that too)\b",
    re.I,
)
# What the evidence forbids. A verb after the marker ("never void an invoice", "cannot be
# deleted or overwritten") or a state of the clause before it ("... are not supported").
PROHIBITION_VERB = re.compile(
    r"\b(?:never|do not|don't|must not|mustn't|should not|shouldn't|cannot|can't|can not"
    r"|may not|(?:is|are) not (?:allowed|permitted) to)\s+(?:be\s+)?(?:\w+ly\s+)?([a-z]+)"
    r"((?:\s*,?\s*(?:or|and|nor)\s+[a-z]+)*)",
    re.I,
)
PROHIBITION_STATE = re.compile(
    r"\b(?:is|are)\s+not\s+(?:supported|allowed|permitted|possible|recommended)\b"
    r"|\b(?:is|are)\s+unsupported\b",
    re.I,
)
# A condition, not a rule: "if the registrar cannot publish the record, ...".
CONDITIONAL = re.compile(r"\b(?:if|when|unless|whether|until)\b", re.I)
# An answer sentence that warns against a step does not prescribe it.
NEGATED = re.compile(
    r"\b(?:don't|do not|never|avoid|must not|mustn't|should not|shouldn't|instead of"
    r"|rather than|not even|no need to)\b",
    re.I,
)
# An answer sentence that asks for information ("Please share the log") prescribes no step.
ASKS_FOR = re.compile(
    r"^\W*(?:please\s+)?(?:share|send|paste|provide|attach|post|tell|let me know)\b", re.I
)
# Words after which an action verb is a purpose or a noun, not a step ("to stop", "the restart").
NOT_A_STEP_BEFORE = frozenset({"to", "the", "a", "an", "this", "that", "your", "its", "of", "no"})
# Where the objects of a step end.
_CLAUSE_BREAK_TEXT = (
    "is are was were so and then to but because during until while before after which that if"
    " when since or not isn't won't can't cannot"
)
CLAUSE_BREAK = frozenset(_CLAUSE_BREAK_TEXT.split())
# Verbs that name the same step ("raised the timeout" = "set the timeout").
VERB_FAMILIES = {
    "change": "set raise increase bump change update adjust edit modify configure lower reduce"
    " decrease double extend shorten",
    "restart": "restart reboot reload bounce recycle cycle",
    "remove": "delete remove purge clear drop flush wipe void cancel",
    "recreate": "recreate reinstall rebuild regenerate",
    "disable": "disable deactivate",
    "enable": "enable activate",
}
PHRASAL_VERBS = (
    (re.compile(r"\b(?:turn|switch)(?:s|ed|ing)?\s+off\b", re.I), "disable"),
    (re.compile(r"\b(?:turn|switch)(?:s|ed|ing)?\s+on\b", re.I), "enable"),
)
