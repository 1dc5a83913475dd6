"""WeChat: an Official Account (公众号, /wechat/mp) and WeChat Customer Service (微信客服,
/wechat/kf) on one core: a ledger that answers each message once across retries and
replicas, an access token shared by the replicas, answers split to WeChat's length."""
