"""A message from WeChat as the channels' core reads it, whichever product sent it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

# text: answered by a turn; greet: a new follower (subscribe) or a new 微信客服 session;
# other: an image, a voice note without recognition, a location, …: a polite fixed reply.
Kind = Literal["text", "greet", "other"]


@dataclass(frozen=True, slots=True)
class Inbound:
    # What WeChat's retries share: "<channel>:<MsgId>", or for an event sender + time
    # (WeChat's own advice for events, which have no MsgId).
    key: str
    user: str  # the openid (公众号) or "<open_kfid>:<external_userid>" (微信客服)
    account: str  # the receiving account: the 公众号's gh_ id, or the corp id
    kind: Kind
    text: str  # the message's text (a voice note's recognition too); "" otherwise
    created: int  # WeChat's CreateTime, seconds
    detail: str = ""  # what else a reply needs: the 微信客服 welcome code

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Inbound:
        return cls(
            key=str(data["key"]),
            user=str(data["user"]),
            account=str(data["account"]),
            kind=data["kind"],
            text=str(data["text"]),
            created=int(data["created"]),
            detail=str(data.get("detail", "")),
        )
