"""Smalltalk: recognise a message that is nothing but a greeting, thanks, goodbye…, and answer it.

A greeting that opens a question ("hi, where is my refund?") is not smalltalk:
answering "Hello!" to it would ignore the question. So the detector consumes
the message phrase by phrase from the start (greetings, thanks, fillers such as
"there" or 啊) and calls it smalltalk only when nothing is left over.
"""

from __future__ import annotations

import re
from functools import lru_cache

from kefu.text.message import Message, as_message
from kefu.text.normalize import normalize

SMALLTALK_CONFIDENCE = 0.9
KINDS = ("greeting", "how_are_you", "who_are_you", "thanks", "goodbye", "ack")

# When one message holds several kinds, the reply answers the most telling one:
# "hi, who are you?" wants the introduction, "thanks, bye" the farewell.
_PRECEDENCE = ("who_are_you", "how_are_you", "goodbye", "thanks", "greeting", "ack")

_EN_END = r"(?![a-z0-9])"
_PHRASES: tuple[tuple[str, str], ...] = (
    (
        "how_are_you",
        r"how are (?:you|u|ya|things)(?: doing)?(?: today)?|how's it going|how is it going|"
        r"how do you do|how have you been|what's up|whats up|wassup|sup",
    ),
    ("how_are_you", r"你(?:最近)?(?:还)?好吗|最近(?:怎么样|好吗)|过得(?:怎么样|好吗)|吃了吗"),
    (
        "who_are_you",
        r"who (?:are|r) (?:you|u)|what are you|who am i (?:talking|chatting|speaking) (?:to|with)|"
        r"are you (?:a |an )?(?:real )?(?:bot|robot|human|person|ai|machine|chatbot|real)|"
        r"is this (?:a |an )?(?:bot|robot|real person|human|ai)|"
        r"am i (?:talking|chatting|speaking) (?:to|with) (?:a |an )?(?:real )?"
        r"(?:bot|robot|human|person|ai|machine|chatbot)"
        r"(?: or (?:a |an )?(?:real )?(?:bot|robot|human|person|ai|machine))?|"
        r"what(?:'s| is) your name|what can (?:you|u) do|what do you do|"
        r"how can you help(?: me)?|what can you help(?: me)? with",
    ),
    (
        "who_are_you",
        r"你是(?:谁|哪位)|你是(?:不是)?(?:机器人|真人|人工智能|ai|人|客服|智能客服)吗?|"
        r"你叫(?:什么|啥)(?:名字)?|你(?:能|会|可以)(?:帮我)?(?:做|干)?(?:什么|啥)|"
        r"(?:能|可以)帮我(?:做|干)?(?:什么|啥)",
    ),
    (
        "greeting",
        r"hi|hello|hey|heya|hiya|howdy|hallo|greetings|good (?:morning|afternoon|evening|day)|"
        r"(?:is )?(?:any|some)(?:one|body) (?:there|here|around)|are you there|morning|evening",
    ),
    (
        "greeting",
        r"你好|您好|嗨|哈喽|哈啰|哈罗|在吗|在么|在不在|有人吗|有人在吗|早上好|早安|上午好|"
        r"中午好|下午好|晚上好|大家好|早",
    ),
    (
        "thanks",
        r"thanks|thank you|thank u|thankyou|thx|tnx|ty|cheers|much appreciated|"
        r"(?:i )?appreciate (?:it|that|your help)|many thanks|you(?:'re| are) "
        r"(?:great|awesome|amazing|the best|so helpful|very helpful|helpful)|"
        r"that(?:'s| was| is) (?:very |really |so )?helpful|great help|"
        r"that (?:helped|helps|solved it|answers? (?:it|my question))(?!\s*\?)"
        r"|problem solved(?!\s*\?)",
    ),
    (
        "thanks",
        r"谢谢|多谢|感谢|谢啦|谢了|辛苦了|辛苦|麻烦你了|麻烦了|太感谢|你真棒|你太棒了|"
        r"帮(?:了)?大忙了?|(?:问题)?解决了(?!\s*[?？吗没么])",
    ),
    (
        "goodbye",
        r"bye(?: bye)?|goodbye|good bye|see (?:you|ya)(?: later| soon)?|later|"
        r"have a (?:nice|good|great|lovely) (?:day|one|evening|weekend|night)|take care|"
        r"good ?night|that(?:'s| is) (?:all|it)|nothing else|no more questions|"
        r"i(?:'m| am) (?:done|good)|no,? that(?:'s| is) all",
    ),
    ("goodbye", r"再见|拜拜|拜|回头见|下次见|晚安|没事了|没有了|没问题了|就这样|没别的了|88"),
    (
        "ack",
        r"ok|okay|okey|k|kk|alright|all right|got it|i see|understood|cool|great|nice|"
        r"awesome|perfect|noted|sounds good|lol|haha+|wow",
    ),
    (
        "ack",
        r"好的|好滴|好嘞|好吧|好|嗯嗯|嗯|哦哦|哦|明白了|明白|知道了|了解了|了解|收到|懂了|行|ok",
    ),
)
# Words that can hang on a greeting or a thanks without adding a request.
_FILLER = (
    r"there|again|so much|very much|a lot|lots|all|everyone|guys|folks|team|mate|friend|"
    r"buddy|bot|kefu|so|very|just|oh|and|then|for (?:the|your) help|"
    r"for helping(?: me)?|for your time|for that|dear|sir|madam|please|pls|"
    r"啊|呀|哈|哈哈|呢|哦|喔|嘛|啦|了|吧|哇|噢|亲|客服|你|您|非常|十分|真的?|很|大家|哈哈哈"
)


def _compile() -> re.Pattern[str]:
    parts = []
    for index, (_kind, pattern) in enumerate(_PHRASES):
        latin = pattern.isascii()
        end = _EN_END if latin else ""
        parts.append(f"(?P<k{index}>(?:{pattern}){end})")
    parts.append(f"(?P<filler>(?:{_FILLER})(?![a-z]))")
    return re.compile("|".join(parts))


_PHRASE = _compile()
_SEPARATORS = re.compile(r"[\W_]+")


def smalltalk_kind(
    message: str | Message, shop_name: str | None = None
) -> tuple[float, str | None]:
    """(confidence, kind) when the whole message is smalltalk, else (0.0, None).

    kind is one of ``KINDS``. A message made only of filler words is not smalltalk.
    ``shop_name`` (``--shop-name``: "Acme|艾克美") is filler too: "thanks Acme!".
    """
    text = as_message(message).lower
    for name in _names(shop_name):
        text = text.replace(name, " ")
    found: set[str] = set()
    pos = 0
    while True:
        gap = _SEPARATORS.match(text, pos)
        if gap is not None:
            pos = gap.end()
        if pos >= len(text):
            break
        match = _PHRASE.match(text, pos)
        if match is None or match.end() == pos:
            return 0.0, None
        group = match.lastgroup
        if group is not None and group != "filler":
            found.add(_PHRASES[int(group[1:])][0])
        pos = match.end()
    for kind in _PRECEDENCE:
        if kind in found:
            return SMALLTALK_CONFIDENCE, kind
    return 0.0, None


# Each reply in English and Chinese; the fields name the shop and its orders only
# where the settings give them (``_fields``), so a shop without a name or an order
# lookup gets a reply that claims neither.
_REPLIES: dict[str, tuple[str, str]] = {
    "greeting": (
        "Hello! I'm {the_shop} assistant — how can I help you today?",
        "您好！我是{shop_de}智能客服，请问有什么可以帮您？",
    ),
    "how_are_you": (
        "I'm doing well, thanks for asking! How can I help you today?",
        "我很好，谢谢关心！请问今天有什么可以帮您？",
    ),
    "who_are_you": (
        "I'm {the_shop} virtual assistant — a bot, not a person. I can answer your "
        "questions{orders}. Ask for a human agent any time.",
        "我是{shop_de}智能客服机器人，可以解答您的问题{orders}。需要人工服务时，随时说“转人工”即可。",
    ),
    "thanks": (
        "You're welcome! Is there anything else I can help you with?",
        "不客气！还有什么可以帮您的吗？",
    ),
    "goodbye": (
        "Thanks for chatting with {us} — have a nice day!",
        "感谢您{consulting}，祝您生活愉快，再见！",
    ),
    "ack": (
        "Great. Anything else I can help you with?",
        "好的，还有其他问题随时问我。",
    ),
}


def _fields(name: str, zh: bool, order_example: str | None) -> dict[str, str]:
    if zh:
        orders = (
            f"，也可以用订单号（例如 {order_example}）帮您查询订单状态" if order_example else ""
        )
        return {
            "shop_de": f"{name}的" if name else "",
            "orders": orders,
            "consulting": f"咨询{name}" if name else "的咨询",
        }
    orders = f" and look up an order by its number (like {order_example})" if order_example else ""
    return {
        "the_shop": f"the {name}" if name else "the",
        "orders": orders,
        "us": name or "us",
    }


@lru_cache(maxsize=8)
def _names(shop_name: str | None) -> tuple[str, ...]:
    """The shop's names as a message reads them (folded, case folded), longest first."""
    names = {normalize(name) for name in (shop_name or "").split("|")} - {""}
    return tuple(sorted(names, key=len, reverse=True))


def shop_names(value: str | None) -> tuple[str, str]:
    """The shop's name in English and in Chinese from ``--shop-name`` ("Acme", or
    "Acme|艾克美" for a Chinese name of its own); empty when it has none."""
    english, _, chinese = (value or "").partition("|")
    return english.strip(), (chinese or english).strip()


def smalltalk_reply(
    kind: str,
    lang: str,
    *,
    shop_name: str | None = None,
    order_example: str | None = None,
) -> str:
    """The templated reply to a smalltalk kind, in English or Chinese ('zh'), naming the
    shop (``shop_name`` as ``--shop-name`` gives it) and showing ``order_example`` as the
    shape of an order number."""
    try:
        en, zh = _REPLIES[kind]
    except KeyError:
        raise ValueError(f"unknown smalltalk kind {kind!r}; expected one of {KINDS}") from None
    english, chinese = shop_names(shop_name)
    if lang == "zh":
        return zh.format(**_fields(chinese, True, order_example))
    return en.format(**_fields(english, False, order_example))
