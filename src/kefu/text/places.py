"""The place-name gazetteer of the answer cache's entity guard.

Shipping, prices, taxes and opening hours differ by place, and an embedding
puts "deliver to Singapore" and "deliver to Malaysia" closer together than most
paraphrases, so place names are compared by name, never by vector. Each place
has one canonical key (English, lower case) and its English and Chinese names,
so "Singapore" and "新加坡" agree across languages.

English words that are also common words (Turkey, Chile, Jordan, Georgia, Nice,
Reading) are left out: written with a capital mid-sentence they are still caught
as proper nouns by the guard. Abbreviations are matched in capitals only ("US",
never the pronoun "us").
"""

from __future__ import annotations

# canonical key: (other English names, Chinese names)
_PLACES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # Southeast Asia.
    "singapore": ((), ("新加坡", "星加坡", "狮城")),
    "malaysia": ((), ("马来西亚", "大马")),
    "kuala lumpur": (("kl",), ("吉隆坡",)),
    "penang": ((), ("槟城", "槟榔屿")),
    "johor": (("johor bahru", "jb"), ("柔佛", "新山")),
    "thailand": ((), ("泰国",)),
    "bangkok": ((), ("曼谷",)),
    "indonesia": ((), ("印度尼西亚", "印尼")),
    "jakarta": ((), ("雅加达",)),
    "bali": ((), ("巴厘岛",)),
    "philippines": (("the philippines",), ("菲律宾",)),
    "manila": ((), ("马尼拉",)),
    "vietnam": (("viet nam",), ("越南",)),
    "hanoi": ((), ("河内",)),
    "ho chi minh city": (("saigon", "ho chi minh"), ("胡志明市", "西贡")),
    "cambodia": ((), ("柬埔寨",)),
    "myanmar": (("burma",), ("缅甸",)),
    "laos": ((), ("老挝",)),
    "brunei": ((), ("文莱",)),
    # Greater China.
    "china": (("mainland china", "prc"), ("中国", "中国大陆", "大陆", "内地")),
    "hong kong": (("hongkong",), ("香港", "中国香港")),
    "macau": (("macao",), ("澳门", "中国澳门")),
    "taiwan": ((), ("台湾", "中国台湾", "臺灣")),
    "taipei": ((), ("台北",)),
    "beijing": (("peking",), ("北京",)),
    "shanghai": ((), ("上海",)),
    "guangzhou": (("canton",), ("广州",)),
    "shenzhen": ((), ("深圳",)),
    "hangzhou": ((), ("杭州",)),
    "chengdu": ((), ("成都",)),
    "chongqing": ((), ("重庆",)),
    "tianjin": ((), ("天津",)),
    "nanjing": ((), ("南京",)),
    "wuhan": ((), ("武汉",)),
    "xian": ((), ("西安",)),
    "suzhou": ((), ("苏州",)),
    "xiamen": ((), ("厦门",)),
    # The rest of Asia and Oceania.
    "japan": ((), ("日本",)),
    "tokyo": ((), ("东京",)),
    "osaka": ((), ("大阪",)),
    "south korea": (("korea", "republic of korea"), ("韩国", "南韩")),
    "seoul": ((), ("首尔",)),
    "north korea": ((), ("朝鲜", "北韩")),
    "india": ((), ("印度",)),
    "pakistan": ((), ("巴基斯坦",)),
    "bangladesh": ((), ("孟加拉",)),
    "sri lanka": ((), ("斯里兰卡",)),
    "nepal": ((), ("尼泊尔",)),
    "australia": ((), ("澳大利亚", "澳洲")),
    "sydney": ((), ("悉尼",)),
    "melbourne": ((), ("墨尔本",)),
    "new zealand": ((), ("新西兰",)),
    # Middle East and Africa.
    "united arab emirates": (("uae", "emirates"), ("阿联酋",)),
    "dubai": ((), ("迪拜",)),
    "saudi arabia": (("saudi",), ("沙特", "沙特阿拉伯")),
    "israel": ((), ("以色列",)),
    "qatar": ((), ("卡塔尔",)),
    "egypt": ((), ("埃及",)),
    "south africa": ((), ("南非",)),
    "nigeria": ((), ("尼日利亚",)),
    "kenya": ((), ("肯尼亚",)),
    "africa": ((), ("非洲",)),
    "middle east": ((), ("中东",)),
    # Europe.
    "europe": ((), ("欧洲",)),
    "european union": (("eu",), ("欧盟",)),
    "united kingdom": (("uk", "britain", "great britain", "england"), ("英国",)),
    "london": ((), ("伦敦",)),
    "ireland": ((), ("爱尔兰",)),
    "france": ((), ("法国",)),
    "paris": ((), ("巴黎",)),
    "germany": ((), ("德国",)),
    "berlin": ((), ("柏林",)),
    "italy": ((), ("意大利",)),
    "spain": ((), ("西班牙",)),
    "portugal": ((), ("葡萄牙",)),
    "netherlands": (("holland", "the netherlands"), ("荷兰",)),
    "belgium": ((), ("比利时",)),
    "switzerland": ((), ("瑞士",)),
    "austria": ((), ("奥地利",)),
    "sweden": ((), ("瑞典",)),
    "norway": ((), ("挪威",)),
    "denmark": ((), ("丹麦",)),
    "finland": ((), ("芬兰",)),
    "poland": ((), ("波兰",)),
    "russia": ((), ("俄罗斯",)),
    "ukraine": ((), ("乌克兰",)),
    "greece": ((), ("希腊",)),
    # The Americas.
    "united states": (("usa", "us", "america", "united states of america"), ("美国",)),
    "new york": (("nyc",), ("纽约",)),
    "los angeles": (("la",), ("洛杉矶",)),
    "san francisco": (("sf",), ("旧金山",)),
    "canada": ((), ("加拿大",)),
    "toronto": ((), ("多伦多",)),
    "vancouver": ((), ("温哥华",)),
    "mexico": ((), ("墨西哥",)),
    "brazil": ((), ("巴西",)),
    "argentina": ((), ("阿根廷",)),
    "south america": ((), ("南美", "南美洲")),
    "north america": ((), ("北美", "北美洲")),
}

# Short English names that are also common words or other abbreviations when
# written in lower case: matched only in capitals.
UPPERCASE_ONLY = frozenset({"us", "uk", "eu", "uae", "la", "sf", "kl", "jb", "prc", "nyc"})

ENGLISH: dict[tuple[str, ...], str] = {}
"""Lower-case English name as a tuple of words -> canonical key."""

CHINESE: dict[str, str] = {}
"""Chinese name -> canonical key."""

CHINESE_NAMES: dict[str, tuple[str, ...]] = {key: chinese for key, (_, chinese) in _PLACES.items()}
"""Canonical key -> its Chinese names."""

for _key, (_english, _chinese) in _PLACES.items():
    for _name in (_key, *_english):
        ENGLISH[tuple(_name.split())] = _key
    for _name in _chinese:
        CHINESE[_name] = _key

LONGEST_ENGLISH = max(len(words) for words in ENGLISH)
# Longest first, so 印度尼西亚 is Indonesia rather than 印度 (India) plus leftovers.
CHINESE_BY_LENGTH = tuple(sorted(CHINESE, key=len, reverse=True))
