"""Cheap, pure detectors of what a customer's message is about (English and Chinese).

They run on every message before any retrieval or model call, so they are
regular expressions over the message read once (``kefu.text.message``): microseconds,
no state, and every decision can be read off the pattern that fired. They look for general
customer-service language, not for particular sentences: a phrase belongs here
when any shop's customers would use it.

Each detector answers with a confidence in [0, 1] (0 = not detected); the
router (``router.py``) weighs them against the knowledge-base hits.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kefu.fastpath.smalltalk import smalltalk_kind
from kefu.text.message import Message, as_message

__all__ = [
    "ANGRY",
    "ASKED_FOR_HUMAN",
    "HandoffSignals",
    "asks_about_order",
    "handoff_score",
    "handoff_signals",
    "is_failure_signal",
    "smalltalk_kind",
]

ASKED_FOR_HUMAN = "asked for a human"
ANGRY = "angry"

# Confidences. An explicit request for a person is as certain as a rule gets; a
# complaint or a manager is a request for a person too, phrased less directly.
EXPLICIT_HUMAN = 1.0
INDIRECT_HUMAN = 0.8
# Anger: one strong marker (profanity, "scam", 垃圾) is enough on its own; a mild
# one ("terrible", "!!!", ALL CAPS) is not, but two of them are.
STRONG_ANGER = 0.85
MILD_ANGER = 0.6
TWO_MILD_ANGER = 0.8
ANGER_REASON = TWO_MILD_ANGER  # from here on the handoff reply apologises


def _any(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns))


# --- order questions ------------------------------------------------------------------

_ORDER_WORDS = r"(?:order|parcel|package|delivery|shipment|item|purchase|stuff)s?"
# "An update on my delivery address" (or its refund) is not about where the order is.
_NOT_A_DETAIL = (
    r"(?! (?:address|date|fee|option|time|number|window|slot|refund|return|cancel|"
    r"cancellation|exchange|charge|payment|invoice|receipt|confirmation)e?s?\b)"
)
_ORDER_QUESTION = _any(
    rf"\bwhere(?:'s| is| are)? (?:my|our) (?:\w+ )?{_ORDER_WORDS}\b",
    r"\bwhere(?:'s| is| are)? the (?:order|parcel|package|shipment)s?\b(?! number)",
    rf"\b(?:track|trace|locate|check on|check) (?:my|our|the status of my) {_ORDER_WORDS}",
    r"\b(?:order|delivery|shipping|shipment) status\b",
    rf"\bstatus of (?:my|our|the) {_ORDER_WORDS}",
    rf"\b(?:has|have|did|is|was) (?:my|our) {_ORDER_WORDS} (?:been )?(?:ship|shipped|sent|"
    r"dispatch|dispatched|arrive|arrived|deliver|delivered|left|out for delivery)",
    rf"\bwhen (?:will|does|do|is|are|can i expect) (?:my|our) {_ORDER_WORDS}",
    rf"\bmy {_ORDER_WORDS} (?:still )?(?:has ?n[o']t|have ?n[o']t|did ?n[o']t|is not|"
    r"isn't|never) ?(?:yet )?(?:arrive|arrived|come|came|ship|shipped|been shipped|"
    r"been delivered|show(?:ed|n)? up)",
    r"\b(?:still )?(?:haven't|have not|didn't|did not|never) (?:got|gotten|get|received?) "
    rf"(?:my|our) {_ORDER_WORDS}",
    rf"\b(?:waiting|still waiting) (?:for|on) (?:my|our) {_ORDER_WORDS}",
    rf"\bmy {_ORDER_WORDS} (?:is |was |got |has been )?(?:late|delayed|lost|stuck)\b",
    rf"\b(?:any|an|the latest) (?:update|news)s? (?:on|about|for|regarding) (?:my|our) "
    rf"{_ORDER_WORDS}\b{_NOT_A_DETAIL}",
    rf"\bwhat(?:'s| is|s)? (?:happening|going on|up) with (?:my|our) {_ORDER_WORDS}\b"
    rf"{_NOT_A_DETAIL}",
    rf"\bwhat(?: has)? happened (?:to|with) (?:my|our) {_ORDER_WORDS}\b{_NOT_A_DETAIL}",
    r"\btracking (?:number|info|information|link|code|status)\b",
    r"物流(?!公司|费)",
    r"(?:我的|我买的)(?:快递|包裹|东西|货).{0,6}(?:到哪|在哪|还没|怎么还|什么时候|啥时候)",
    r"到哪(?:了|里了|儿了|一步了)",
    r"(?:订单|包裹|快递|单子|物流|下的单|那单|这单).{0,6}(?:状态|进度|信息)",
    r"(?:订单|包裹|快递|单子|东西|货)?.{0,4}(?:发货|发出|寄出|送到|到货|送达|签收)了(?:吗|没|没有)",
    r"(?:订单|包裹|快递|单子|东西)(?:还|怎么还|一直|迟迟|到现在)?(?:都)?没(?:有)?(?:到|收到|发|送)",
    r"(?:还没|怎么还没|一直没|迟迟没|还没有)(?:收到货|收到包裹|收到快递|收到东西|到货|发货|送到|送来)",
    r"(?:查|查询|查一下|查下|跟踪)(?:一下)?(?:我的)?(?:订单|包裹|快递|物流)",
    r"(?:订单|包裹|快递|单子|东西).{0,4}(?:什么时候|啥时候|几时|哪天)(?:能|才能|会)?(?:到|送到|发货|发)",
    r"(?:快递|物流|运)单号",
)


# "How can I track my order?" asks how tracking works — the FAQ's job — not where
# one order is; only a question about a particular order goes to the order tool.
_HOW_TO = _any(
    r"^\W*(?:how (?:do|can|could|would|should|to)|where (?:can|do|could|should|would)|"
    r"is (?:there|it) (?:a way|possible)|can (?:i|we)|what(?:'s| is) the (?:best )?way)\b",
    r"(?:怎么|怎样|如何|在哪里?|哪里|去哪|从哪)(?:才)?(?:可以|能|才能)?(?:看|查|查看|查询|跟踪|追踪|找到)",
)


def asks_about_order(message: str | Message) -> bool:
    """Asks where an order is or what state it is in ("where is my parcel?", "物流", "到哪了").

    Not how tracking works ("how can I track my order?", "在哪里看物流"): that is a
    question for the FAQ. With no order number in the message, the order tool
    answers by asking for it.
    """
    text = as_message(message).spaced
    return _ORDER_QUESTION.search(text) is not None and _HOW_TO.search(text) is None


# --- handoff --------------------------------------------------------------------------

_PERSON = (
    r"(?:a |an |the |some |your |one of your )?(?:real |live |actual |human |customer "
    r"(?:service |support |care )?)?(?:human|humans|person|people|agent|agents|"
    r"representative|rep|operator|staff|someone|somebody|anyone|anybody|employee|"
    r"manager|supervisor|customer service|customer support|support team|team member)"
)
_ASKS_HUMAN = _any(
    rf"\b(?:speak|talk|chat|get through)(?: directly)? (?:to|with) {_PERSON}\b",
    rf"\b(?:connect|transfer|put|pass|escalate|forward|route) (?:me|this|it|my \w+)"
    rf"(?: through)? (?:to|with) {_PERSON}\b",
    r"\b(?:want|need|like|get|give|find|request|prefer|let me have)(?: me| us)? "
    r"(?:a |an |the |your |some |one of your )?"
    r"(?:real |live )?(?:human|humans|real person|agent|representative|operator|manager|"
    r"supervisor|customer service)\b",
    r"\b(?:real|live|actual) (?:human|person|agent|people|someone)\b",
    r"\bhuman (?:agent|being|support|help|please)\b",
    r"^\W*(?:a |an )?(?:human|agent|representative|operator|real person|live agent)"
    r"(?:,? please|,? pls|,? now)?\W*$",
    r"\bescalate\b",
    r"人工(?!智能|费)",
    r"真人|活人",
    r"转(?:接)?(?:客服|人工|真人|经理)",
    r"(?:找|叫|要|让|换)(?:个|一个)?(?:你们)?(?:的)?(?:客服|经理|主管|负责人|领导)",
    r"(?:找|叫)(?:个|一个)人来",
    r"客服经理",
    r"(?:和|跟|与)(?:真人|客服|人工|你们的?(?:经理|主管|负责人))(?:说|聊|谈|沟通|对话)",
    r"\bnot (?:a |another )?(?:bot|robot|machine)\b",
    r"不要(?:机器人|机器)",
)
# "human resources", "a person's details": words that look like the above but are not
# a request for a person; matched first and removed.
_NOT_HUMAN = _any(
    r"\bhuman resources\b",
    r"\bam i (?:talking|chatting|speaking) (?:to|with) (?:a |an )?(?:real |actual )?"
    r"(?:human|person|bot|robot|ai|machine)\b(?: or (?:a |an )?(?:real |actual )?\w+)?",
    r"\bare you (?:a |an )?(?:real |actual )?(?:human|person|bot|robot|ai|machine)\b",
    r"\bis (?:this|it) (?:a |an )?(?:real |actual )?(?:human|person|bot|robot)\b",
    r"你是(?:不是)?(?:真人|人工|机器人|人)",
    r"是(?:真人|机器人)(?:吗|还是)",
    r"人工客服?的?(?:几点|什么时候|工作时间|上班时间|服务时间)",
)
_COMPLAINT = _any(
    r"\b(?:make|file|lodge|register|submit|raise|have) (?:a |an )?(?:formal |official )?"
    r"complaint\b",
    r"\bi (?:want|would like|wish|need) to complain\b",
    r"\bspeak to (?:the|your) manager\b",
    r"投诉",
    r"(?:你们|你)?(?:领导|经理|主管)(?:呢|在哪)",
)
_STRONG_ANGER = _any(
    r"\b(?:fuck\w*|f\*+k|shit\w*|bullshit|crap|crappy|damn|damned|wtf|stfu|bastard\w*|"
    r"idiot\w*|stupid|moron\w*|dumb|scam|scammers?|fraud|rip-?off|disgusting|pathetic|"
    r"outrageous|unacceptable|worst)\b",
    r"\bfed up\b",
    r"\bsick (?:and tired )?of\b",
    r"垃圾(?!桶|袋|篓|箱|分类|处理)",  # a home shop sells 垃圾桶 (bins)
    r"气死|气人",
    r"什么破",
    r"破(?:玩意|东西|网站|系统|客服|店|机器人|公司)",
    r"他妈|妈的|tmd|尼玛|操你|卧槽|滚(?!筒|轮|动|珠|刷)",
    r"骗子|骗人|坑人|黑店|无良",
    r"忍无可忍|受够了|太过分|欺人太甚",
    # Anger the customer declares is anger, however politely worded.
    r"\b(?:i'm|i am|im|we're|we are|i feel|i'm getting|i am getting)(?: so| very| really| "
    r"extremely| absolutely)? (?:angry|furious|livid|pissed|outraged|mad)\b",
    r"我(?:很|非常|真的|真|太|特别)?(?:生气|愤怒|火大|恼火)",
)
_MILD_ANGER = _any(
    r"\b(?:useless|terrible|horrible|awful|ridiculous|absurd|annoying|annoyed|angry|furious|"
    r"frustrat\w+|disappoint\w*|incompetent|nonsense|hopeless|sucks?)\b",
    # "you people", "nobody ever answers": the anger of a customer left waiting
    r"(?<!thank )\byou people\b(?! (?:are|were) (?:great|amazing|awesome|the best|so helpful))",
    r"\b(?:no ?one|nobody) (?:ever |even )?(?:answers|replies|responds|gets back|calls back)"
    r"\b(?! the door)",
    r"没人(?:回|理|管|接)(?!收|货|快递|包裹)",
    r"太差|很差|真差|差劲|差评|太烂|烂透|无语|搞什么|离谱|恶心|失望|生气|愤怒|什么鬼",
)
_EXCLAIM = re.compile(r"[!！]{2,}|[?？][!！]|[!！][?？]")
_CAPS_WORD = re.compile(r"\b[A-Z]{2,}\b")
# Anchored at a token's start: unanchored, each position of a long digitless run rescanned
# the rest of it (quadratic: 8 000 letters took 0.8 s, a million froze the server).
_CODE = re.compile(r"(?<![\w-])[\w-]*\d[\w-]*")
_LATIN_WORD = re.compile(r"\b[A-Za-z]{2,}\b")


@dataclass(frozen=True, slots=True)
class HandoffSignals:
    """The two reasons for a handoff, scored apart so the router can rank them apart."""

    asked: float  # asked for a person (1.0) or complained / asked for a manager (0.8)
    angry: float


def handoff_signals(message: str | Message) -> HandoffSignals:
    read = as_message(message)
    text = _NOT_HUMAN.sub(" ", read.spaced)
    if _ASKS_HUMAN.search(text):
        asked = EXPLICIT_HUMAN
    elif _COMPLAINT.search(text):
        asked = INDIRECT_HUMAN
    else:
        asked = 0.0
    return HandoffSignals(asked, _anger(read.folded, text))


def handoff_score(message: str | Message) -> tuple[float, str | None]:
    """(confidence, reason): reason "asked for a human" or "angry"; (0, None) when neither.

    Confidence 1.0 means an explicit request for a person. Real anger (``ANGER_REASON``
    or more) is named as the reason even alongside a request, so the reply opens with
    an apology. "human resources" or "are you a real person?" are not requests for a
    person (the latter is who-are-you smalltalk).
    """
    signals = handoff_signals(message)
    confidence = max(signals.asked, signals.angry)
    if confidence == 0:
        return 0.0, None
    if signals.asked == 0 or signals.angry >= ANGER_REASON:
        return confidence, ANGRY
    return confidence, ASKED_FOR_HUMAN


def _anger(original: str, folded: str) -> float:
    if _STRONG_ANGER.search(folded):
        return STRONG_ANGER
    mild = len(_MILD_ANGER.findall(folded))
    mild += _EXCLAIM.search(folded) is not None
    mild += _shouting(original)
    if mild >= 2:
        return TWO_MILD_ANGER
    return MILD_ANGER if mild == 1 else 0.0


def _shouting(original: str) -> bool:  # the folded text, case kept
    """Three or more Latin words, mostly in capitals (codes with digits, as order numbers
    of any shop's shape are, and "I" do not count)."""
    text = _CODE.sub(" ", original)
    words = _LATIN_WORD.findall(text)
    if len(words) < 3:
        return False
    caps = len(_CAPS_WORD.findall(text))
    return caps >= 3 and caps / len(words) >= 0.6


# --- the bot failed -------------------------------------------------------------------

_FAILURE = _any(
    r"\b(?:that|this|it|you|your (?:answer|reply))(?:'s| is| was)? ?(?:did ?n[o']t|does ?n[o']t|"
    r"do ?n[o']t|is ?n[o']t|was ?n[o']t|not|never|wo ?n't|are ?n[o']t)"
    r" (?:help|helping|helpful|answer|answering|make sense|work|working|understand|"
    r"understanding|get it|relevant|what i (?:asked|meant|wanted|need|needed))\b",
    r"\bnot (?:what i (?:asked|meant|wanted|need|needed)|my question|helpful|relevant)\b",
    r"\b(?:you|it) (?:did ?n[o']t|did not|have ?n[o']t|have not|never) answer",
    r"\b(?:answer|read) my question\b",
    r"\bthat(?:'s| is| was) (?:wrong|incorrect|not (?:right|correct|true|it))\b",
    r"\b(?:useless|pointless|irrelevant|wrong) (?:answer|reply|response|bot)\b",
    r"\bmakes? no sense\b",
    r"\bthat's not (?:what|my)\b",
    r"\bi (?:already|just) (?:said|asked|told you)\b",
    r"没用|没有用|没帮助|没有帮助|帮不上|不管用",
    r"答非所问|所答非所问|牛头不对马嘴|文不对题",
    r"不是我(?:要)?(?:问|想问|要问|想要|想知道)的",
    r"(?:你|您)(?:根本|还是|都)?(?:没|没有)(?:回答|解决|明白|看懂|理解|听懂)",
    r"没(?:有)?回答(?:我的)?(?:问题)?",
    r"(?:你|您)(?:根本)?(?:不懂|听不懂|看不懂|不明白|没懂)",
    r"(?:你|您)?(?:说|回答|答)的?(?:不对|不是|错了)",
    r"说了(?:等于|跟)没说",
    r"(?:问|说)了(?:好几|几|两|三|四|五|[2-9]|n)(?:遍|次)",
    r"\b(?:asked|said|told you)(?: (?:this|that|you|it))? (?:twice|three times|\d+ times|"
    r"several times|many times|already)\b",
    r"\b(?:second|third|fourth|fifth|\d+(?:st|nd|rd|th)) time (?:i'm|i am|i've|i have) "
    r"(?:asking|asked|written|writing|contacting|contacted)",
    r"我(?:已经|刚才|刚刚)(?:问过|说过|说了)",
    r"^(?:useless|not helpful|no help|wrong|nope, wrong)\W*$",
)


def is_failure_signal(message: str | Message) -> bool:
    """The customer says the bot's previous answer failed them ("that didn't help", "答非所问")."""
    return _FAILURE.search(as_message(message).spaced) is not None


# "And the refund?", "what about express?", 运费呢？: short, and about what came before.
_FOLLOW_UP = re.compile(
    r"^\s*(?:and|also|what about|how about)\b[^.!?]{0,40}\??\s*$"
    r"|^\s*(?:那么?|还有|另外)?[^，。！？,.!?]{1,8}呢[?？]?\s*$",
    re.IGNORECASE,
)


def is_follow_up(message: str | Message) -> bool:
    """The message follows on from an earlier one: only the conversation says what it
    asks, so no answer given to other words, verbatim or cached, fits it."""
    return _FOLLOW_UP.search(as_message(message).folded) is not None
