"""Word lists of the entity guard: negation cues, number words, units, contrasts.

Kept apart from the rules in ``guard.py`` so a reviewer can read the rules
without scrolling through vocabulary, and extend the vocabulary without
touching the rules.
"""

from __future__ import annotations


def _set(words: str) -> frozenset[str]:
    return frozenset(words.split())


# --- negation -------------------------------------------------------------------------

NEGATIONS_EN = frozenset(
    {"not", "no", "never", "without", "cannot", "nobody", "nothing", "none", "neither", "nor"}
    # the apostrophe-less spellings customers type on phones
    | {"dont", "doesnt", "didnt", "cant", "couldnt", "wont", "wouldnt", "isnt", "arent"}
    | {"wasnt", "werent", "shouldnt", "havent", "hasnt", "hadnt", "aint"}
)

# Single characters that negate in Chinese; 没有 is counted once, before these.
NEGATIONS_ZH = ("没有", "不", "没", "别", "无", "非", "未", "勿", "莫", "甭")

# Words that contain a negation character without negating (steel, quite good, but,
# sorry, other people, very, Africa, future, wireless, regardless...). Removed before
# counting. "不同"/"无法"/"无糖" stay negations: their opposite is a different answer.
NOT_NEGATIONS_ZH = (
    "不锈钢", "不错", "不过", "不管", "不仅", "不好意思", "不少", "不久", "不断", "不然",
    "差不多", "不如", "了不起", "忍不住", "对不起", "来不及", "别人", "别的", "特别",
    "区别", "类别", "分别", "性别", "级别", "识别", "告别", "别墅", "别处", "别名",
    "非常", "非洲", "未来", "无线", "无论", "无人机", "没关系", "莫名",
)  # fmt: skip

# --- numbers --------------------------------------------------------------------------

NUMBER_WORDS_EN = {
    "zero": 0, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60,
    "seventy": 70, "eighty": 80, "ninety": 90, "hundred": 100, "thousand": 1000,
    "single": 1, "double": 2, "dozen": 12,
}  # fmt: skip

# Suffixes that make "10kg", "3pm" or "2nd" a number with a unit, not an id.
UNIT_SUFFIXES = _set(
    "st nd rd th am pm kg g mg ml l cm mm m km h hr hrs min mins s sec gb tb mb k x d "
    "day days yr yrs y pcs pc usd sgd rmb myr hkd twd aud eur gbp jpy cny w v mah"
)

ZH_DIGITS = {"零": 0, "\u3007": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6,
             "七": 7, "八": 8, "九": 9}  # fmt: skip
ZH_MULTIPLIERS = {"十": 10, "百": 100, "千": 1000, "万": 10_000}

# Measure words after which a Chinese numeral is a quantity ("两年", "三天"), unlike
# "一下", "一起", "一般", "统一".
ZH_CLASSIFIERS = (
    "个", "年", "月", "天", "日", "号", "周", "星期", "礼拜", "小时", "分钟", "秒", "元",
    "块", "毛", "角", "岁", "件", "次", "双", "条", "台", "位", "张", "本", "份", "箱",
    "瓶", "包", "公斤", "斤", "克", "米", "厘米", "折", "倍", "层", "楼", "种", "款",
    "套", "家", "单", "笔", "趟", "寸", "码", "成",
)  # fmt: skip

# --- names ----------------------------------------------------------------------------

WEEKDAYS_EN = {
    "monday": "monday", "tuesday": "tuesday", "wednesday": "wednesday",
    "thursday": "thursday", "friday": "friday", "saturday": "saturday", "sunday": "sunday",
    "weekend": "weekend", "weekends": "weekend",
    "january": "january", "february": "february", "april": "april", "june": "june",
    "july": "july", "august": "august", "september": "september", "october": "october",
    "november": "november", "december": "december",
}  # fmt: skip
WEEKDAYS_ZH = {"一": "monday", "二": "tuesday", "三": "wednesday", "四": "thursday",
               "五": "friday", "六": "saturday", "日": "sunday", "天": "sunday",
               "末": "weekend"}  # fmt: skip

# Capitalised words that start a sentence without being names. A capitalised
# first word outside this list ("Samsung phones...") is kept as a possible name.
SENTENCE_STARTERS = _set(
    """what when where who whom whose why how which whats wheres whens hows whos
    do does did is are was were am can could will would should shall may might must
    have has had i you we they he she it my your our their this that these those there
    here hi hello hey dear thanks thank please pls sorry excuse ok okay yes no good
    morning afternoon evening and but so if also then for in on at to from with about
    after before any the a an just still actually quick question tell show help give
    send let need want cancel change track return refund ship deliver check explain
    update get find buy order pay is isn't aren't don't doesn't can't won't i'm i've
    i'd i'll what's where's how's who's there's it's let's would've any some all one
    not never without does hm hmm um well btw by via"""
)
# Capitalised or shouted words that are not names wherever they stand.
NOT_NAMES = frozenset({"i", "i'm", "i've", "i'll", "i'd", "ok", "okay", "asap", "faq", "pls"})

# Brands and platforms named in Chinese, which has no capitals to mark a name: a
# question about 淘宝's return policy is not about this shop's. Names that are also
# everyday words (菜鸟 "newbie", 小米 "millet", 三星 "three stars") are left out.
_ZH_BRANDS = """
淘宝 天猫 京东 拼多多 闲鱼 唯品会 苏宁 当当 亚马逊 微信 支付宝 抖音
快手 小红书 微博 美团 饿了么 滴滴 高德 百度 腾讯 阿里巴巴 网易 顺丰
圆通 中通 申通 韵达 宜家 星巴克 麦当劳 肯德基 爱奇艺 优酷
哔哩哔哩 网飞 华为 联想 虾皮 来赞达 优步 脸书 谷歌 推特
耐克 阿迪达斯 优衣库 无印良品 花呗 借呗 余额宝
"""
ZH_BRANDS = tuple(sorted(_ZH_BRANDS.split(), key=len, reverse=True))  # longest first

# --- contrasts ------------------------------------------------------------------------

# Groups of mutually exclusive alternatives (buy/sell is not one: the customer buys
# what the shop sells), each alternative a set of word forms.
# Two questions that each name an alternative of a group must name the same one:
# "refund before shipping" is not "refund after shipping".
# Each alternative is (its label, its word forms); the label is its first form.
CONTRASTS_EN: tuple[tuple[tuple[str, frozenset[str]], ...], ...] = tuple(
    tuple((alt.split()[0], frozenset(alt.split())) for alt in group)
    for group in (
        ("before prior", "after"),
        ("import imports importing imported", "export exports exporting exported"),
        ("return returns returning returned", "exchange exchanges exchanging swap"),
        ("upgrade upgrading", "downgrade downgrading"),
        ("increase increasing raise", "decrease decreasing reduce lower"),
        ("add adding", "remove removing delete deleting"),
        ("enable enabling activate", "disable disabling deactivate"),
        ("subscribe subscribing", "unsubscribe unsubscribing"),
        ("login log-in", "logout log-out"),
        ("open opening", "close closing closed"),
        ("send sending sent", "receive receiving received"),
        ("deposit", "withdraw withdrawal"),
        ("maximum max most highest", "minimum min least lowest"),
        ("more above over", "less fewer below under"),
        ("earliest", "latest"),
        ("domestic local", "international overseas abroad"),
        ("express expedited priority", "standard regular economy"),
        ("credit", "debit"),
        ("today", "tomorrow", "yesterday"),
        ("inbound", "outbound"),
        ("first", "last"),
    )
)
CONTRASTS_ZH: tuple[tuple[tuple[str, ...], ...], ...] = (
    (("之前", "以前", "提前"), ("之后", "以后")),
    (("进口",), ("出口",)),
    (("退货",), ("换货",)),
    (("退款",), ("付款",)),
    (("升级",), ("降级",)),
    (("增加",), ("减少",)),
    (("打开", "开启", "开通"), ("关闭", "关掉")),
    (("登录", "登陆"), ("退出", "登出")),
    (("最多", "最高", "最大"), ("最少", "最低", "最小")),
    (("以上", "超过"), ("以下", "不到")),
    (("国内",), ("国际", "海外", "境外")),
    (("加急", "特快"), ("普通", "标准")),
    (("信用卡",), ("借记卡",)),
    (("今天",), ("明天",), ("昨天",)),
    (("寄出", "发出"), ("收到", "签收")),
)
