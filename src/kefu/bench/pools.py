"""Built-in message pools of an online shop's customers, in English and Chinese.

FAQs are listed most popular first (Zipf rank 1 first). In unique templates ``{n}`` becomes
a number no other message of the run has; in order templates ``{order}`` an order number.
"""

from __future__ import annotations

EN_FAQS = (
    "How do I return a product?",
    "Where is my parcel?",
    "How long does shipping take?",
    "What is your refund policy?",
    "Can I change my delivery address?",
    "How do I cancel my order?",
    "Do you ship internationally?",
    "What payment methods do you accept?",
    "How do I track my order?",
    "Can I exchange an item for a different size?",
    "Do you offer free shipping?",
    "How do I reset my password?",
    "When will my refund arrive?",
    "Is there a warranty on electronics?",
    "Can I pay in instalments?",
    "Do you have a physical store?",
    "How do I use a discount code?",
    "Why was my payment declined?",
    "Can I add an item to an order I already placed?",
    "Do you offer gift wrapping?",
    "How do I contact a human agent?",
    "What are your customer service hours?",
    "Can I order without an account?",
    "Do you price match?",
    "How do I unsubscribe from your emails?",
    "Is my personal data safe with you?",
    "Can I pick up my order in person?",
    "What should I do if my item arrived damaged?",
    "Do you sell gift cards?",
    "How do I leave a review?",
)

EN_UNIQUE = (
    "I ordered {n} units of the ceramic mugs for my cafe. Can I get a bulk discount?",
    "My receipt number is R{n} and the blender I bought stopped working. What now?",
    "The jacket from invoice {n} is too small. Can I swap it for the next size up?",
    "I was charged {n} cents twice for the same order. Can you check?",
    "Could you hold {n} of the linen shirts until Friday? I'll pay on pickup.",
    "My coupon WELCOME{n} says it expired yesterday. Can you still apply it?",
    "I need {n} matching chairs for an event. Do you have that many in stock?",
    "The parcel with tracking code TR{n} shows delivered but I never got it.",
    "Is the lamp in listing {n} compatible with European sockets?",
    "I'd like to send {n} gift boxes to different addresses. How do I do that?",
)

EN_ORDERS = (
    "Where is my order {order}?",
    "What is the status of order {order}?",
    "Has order {order} shipped yet?",
    "When will order {order} arrive?",
)

ZH_FAQS = (
    "怎么退货？",
    "我的包裹到哪里了？",
    "发货需要多长时间？",
    "退款政策是什么？",
    "可以修改收货地址吗？",
    "怎么取消订单？",
    "你们发国际快递吗？",
    "支持哪些付款方式？",
    "怎么查询物流？",
    "衣服尺码不合适可以换吗？",
    "包邮吗？",
    "忘记密码怎么办？",
    "退款多久到账？",
    "电子产品有保修吗？",
    "可以分期付款吗？",
    "你们有实体店吗？",
    "优惠券怎么用？",
    "为什么付款失败了？",
    "下单后还能加购商品吗？",
    "可以帮忙包装成礼物吗？",
    "怎么联系人工客服？",
    "客服几点上班？",
    "不注册可以下单吗？",
    "你们保价吗？",
    "怎么取消订阅邮件？",
    "我的个人信息安全吗？",
    "可以到店自提吗？",
    "收到的商品坏了怎么办？",
    "你们卖礼品卡吗？",
    "怎么写评价？",
)

ZH_UNIQUE = (
    "我给咖啡店订了{n}个陶瓷杯，能打折吗？",
    "我的小票号是R{n}，买的榨汁机坏了，怎么办？",
    "发票号{n}的外套小了，能换大一号吗？",
    "同一个订单被扣了两次{n}分钱，能帮我查一下吗？",
    "能帮我留{n}件亚麻衬衫到周五吗？我到店付款。",
    "优惠码WELCOME{n}显示昨天过期了，还能用吗？",
    "活动需要{n}把一样的椅子，库存够吗？",
    "运单号TR{n}显示已签收，但我没收到。",
    "商品编号{n}的台灯能用欧标插座吗？",
    "我想把{n}个礼盒寄到不同的地址，怎么操作？",
)

ZH_ORDERS = (
    "订单{order}到哪里了？",
    "订单{order}现在是什么状态？",
    "订单{order}发货了吗？",
    "订单{order}什么时候能到？",
)

BUILTIN = {
    "en": (EN_FAQS, EN_UNIQUE, EN_ORDERS),
    "zh": (ZH_FAQS, ZH_UNIQUE, ZH_ORDERS),
}
