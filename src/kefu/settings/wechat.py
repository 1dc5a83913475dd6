"""Settings of the WeChat channels: an Official Account (公众号) and WeChat Customer
Service (微信客服). Each is on once its id is set; its routes exist only then."""

from __future__ import annotations

from typing import ClassVar, Self

from pydantic import Field, field_validator, model_validator

from kefu.settings.group import SettingsGroup

AES_KEY_LENGTH = 43  # an EncodingAESKey as WeChat's consoles show it (base64 of 32 bytes)


class WeChatSettings(SettingsGroup):
    """WeChat: an Official Account at /wechat/mp, WeChat Customer Service at /wechat/kf."""

    heading: ClassVar[str] = "WeChat"

    wechat_app_id: str | None = Field(
        None,
        description="The Official Account's AppID (开发 > 基本配置); setting it serves "
        "/wechat/mp, the URL to paste into the account's server configuration.",
    )
    wechat_app_secret: str | None = Field(
        None,
        description="The Official Account's AppSecret: fetches the access token that sends "
        "answers later than the passive reply WeChat waits 5 s for (客服消息).",
    )
    wechat_token: str | None = Field(
        None,
        description="The Token typed into the Official Account's server configuration: "
        "every request WeChat sends is signed with it.",
    )
    wechat_aes_key: str | None = Field(
        None,
        description="The Official Account's EncodingAESKey (43 characters): needed for "
        "安全模式 (encrypted messages) and 兼容模式; plaintext mode needs none.",
    )
    wechat_api_base: str = Field(
        "https://api.weixin.qq.com",
        description="Base URL of the Official Account's API (access token, customer service "
        "messages); tests point it at a local imitation.",
    )
    wechat_reply_budget: float = Field(
        4.0,
        ge=0.0,
        le=4.8,
        description="Seconds an answer may take to go back in the reply to WeChat's request "
        "(WeChat waits 5 s, then retries); a slower one is answered 'success' at once and "
        "sent through the customer service message API when ready.",
    )
    wechat_kf_corp_id: str | None = Field(
        None,
        description="WeChat Customer Service (微信客服): the WeCom corp id (企业ID); setting it "
        "serves /wechat/kf, the callback URL of the 微信客服 API.",
    )
    wechat_kf_secret: str | None = Field(
        None,
        description="微信客服: the Secret of its API (微信客服 > API > Secret), for the access "
        "token that pulls (sync_msg) and sends (send_msg) messages.",
    )
    wechat_kf_token: str | None = Field(
        None, description="微信客服: the Token of its callback configuration."
    )
    wechat_kf_aes_key: str | None = Field(
        None, description="微信客服: the EncodingAESKey of its callback configuration."
    )
    wechat_kf_api_base: str = Field(
        "https://qyapi.weixin.qq.com",
        description="Base URL of the WeCom API that 微信客服 uses; tests point it at a local "
        "imitation.",
    )

    @field_validator("wechat_aes_key", "wechat_kf_aes_key")
    @classmethod
    def _aes_key_shape(cls, value: str | None) -> str | None:
        if value is not None and len(value.strip()) != AES_KEY_LENGTH:
            raise ValueError(
                f"an EncodingAESKey has {AES_KEY_LENGTH} characters; copy it whole from the "
                "WeChat console"
            )
        return value.strip() if value is not None else None

    @field_validator("wechat_api_base", "wechat_kf_api_base")
    @classmethod
    def _base_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("give an http:// or https:// URL")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _channels_complete(self) -> Self:
        if self.wechat_app_id and not (self.wechat_app_secret and self.wechat_token):
            raise ValueError(
                "wechat_app_id needs --wechat-app-secret and --wechat-token "
                "(KEFU_WECHAT_APP_SECRET, KEFU_WECHAT_TOKEN)"
            )
        kf = (self.wechat_kf_secret, self.wechat_kf_token, self.wechat_kf_aes_key)
        if self.wechat_kf_corp_id and not all(kf):
            raise ValueError(
                "wechat_kf_corp_id needs --wechat-kf-secret, --wechat-kf-token and "
                "--wechat-kf-aes-key (微信客服 callbacks are always encrypted)"
            )
        return self
