"""What WeChat's requests carry around a message: the signature, and in 安全模式 the AES
envelope, checked and opened with wechatpy's own crypto; a passive reply sealed the same
way. Anything that fails a check is refused with the reason, never a 500.
"""

from __future__ import annotations

import binascii
import secrets
import time
from collections.abc import Mapping
from typing import Any
from xml.parsers.expat import ExpatError

import xmltodict
from wechatpy.crypto import WeChatCrypto
from wechatpy.enterprise.crypto import WeChatCrypto as WeComCrypto
from wechatpy.exceptions import InvalidSignatureException
from wechatpy.utils import check_signature

from kefu.errors import InvalidRequest, Unauthenticated

# A request signed longer ago than this is refused: the ledger forgets a message after an
# hour, so an old request replayed must not be answered again.
REPLAY_WINDOW = 3000.0


def _arg(query: Mapping[str, str], name: str) -> str:
    value = query.get(name)
    if not value:
        raise InvalidRequest(f"WeChat's {name} is missing from the query", param=name)
    return value


def _fresh(timestamp: str) -> None:
    try:
        signed = float(timestamp)
    except ValueError:
        raise InvalidRequest("timestamp is not a number", param="timestamp") from None
    if abs(time.time() - signed) > REPLAY_WINDOW:
        raise Unauthenticated(
            "the request's timestamp is too far from now (a replay, or a wrong clock)",
            reason="stale",
        )


def read_xml(text: str | bytes) -> dict[str, Any]:
    """The ``<xml>`` element as a dict; InvalidRequest for anything else."""
    try:
        parsed = xmltodict.parse(text, disable_entities=True)
    except (ExpatError, ValueError) as exc:
        raise InvalidRequest(f"the body is not WeChat's XML ({exc})") from None
    root = parsed.get("xml") if isinstance(parsed, dict) else None
    if not isinstance(root, dict):
        raise InvalidRequest("the body has no <xml> element")
    return root


def _undecryptable(exc: Exception) -> InvalidRequest:
    return InvalidRequest(f"the message cannot be decrypted ({type(exc).__name__})")


def _bad_signature() -> Unauthenticated:
    return Unauthenticated("the request's signature does not match the token", reason="signature")


class OfficialAccountEnvelope:
    """The 公众号's: a signature over token, timestamp and nonce on every request; in
    安全模式 (``encrypt_type=aes``) the message in ``<Encrypt>``, with its own signature."""

    def __init__(self, token: str, aes_key: str | None, app_id: str) -> None:
        self.token = token
        self.crypto = WeChatCrypto(token, aes_key, app_id) if aes_key else None

    def verify(self, query: Mapping[str, str]) -> None:
        timestamp = _arg(query, "timestamp")
        try:
            check_signature(self.token, _arg(query, "signature"), timestamp, _arg(query, "nonce"))
        except InvalidSignatureException:
            raise _bad_signature() from None
        _fresh(timestamp)

    def echo(self, query: Mapping[str, str]) -> str:
        """The GET WeChat sends when the URL is saved in its console: echo ``echostr``."""
        self.verify(query)
        return _arg(query, "echostr")

    def open(self, query: Mapping[str, str], body: bytes) -> tuple[dict[str, Any], bool]:
        """The message's fields, and whether it came encrypted (the reply must be too)."""
        self.verify(query)
        if query.get("encrypt_type", "raw") != "aes":
            return read_xml(body), False
        if self.crypto is None:
            raise InvalidRequest(
                "WeChat sent an encrypted message but no EncodingAESKey is set "
                "(--wechat-aes-key, KEFU_WECHAT_AES_KEY)"
            )
        outer = read_xml(body)
        if not outer.get("Encrypt"):
            raise InvalidRequest("encrypt_type=aes but the body has no <Encrypt>")
        try:
            plain = self.crypto.decrypt_message(
                outer, _arg(query, "msg_signature"), query["timestamp"], query["nonce"]
            )
        except InvalidSignatureException:
            raise _bad_signature() from None
        except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
            raise InvalidRequest(f"the message cannot be decrypted ({exc})") from None
        except Exception as exc:  # wechatpy's InvalidAppIdException and padding errors
            raise _undecryptable(exc) from None
        return read_xml(plain), True

    def seal(self, xml: str, encrypted: bool) -> str:
        if not encrypted or self.crypto is None:
            return xml
        return str(self.crypto.encrypt_message(xml, secrets.token_hex(8), str(int(time.time()))))


class WeComEnvelope:
    """WeCom's (微信客服's callbacks): always encrypted, ``msg_signature`` over the cipher
    text; the verification GET's ``echostr`` is encrypted too and answered decrypted."""

    def __init__(self, token: str, aes_key: str, corp_id: str) -> None:
        self.crypto = WeComCrypto(token, aes_key, corp_id)

    def _opened(self, call: Any) -> str:
        try:
            return str(call())
        except InvalidSignatureException:
            raise _bad_signature() from None
        except InvalidRequest:
            raise
        except Exception as exc:  # bad base64, padding, the wrong corp id
            raise _undecryptable(exc) from None

    def echo(self, query: Mapping[str, str]) -> str:
        signature, timestamp = _arg(query, "msg_signature"), _arg(query, "timestamp")
        nonce, echostr = _arg(query, "nonce"), _arg(query, "echostr")
        plain = self._opened(
            lambda: self.crypto.check_signature(signature, timestamp, nonce, echostr)
        )
        _fresh(timestamp)
        return plain

    def open(self, query: Mapping[str, str], body: bytes) -> dict[str, Any]:
        signature, timestamp = _arg(query, "msg_signature"), _arg(query, "timestamp")
        nonce = _arg(query, "nonce")
        outer = read_xml(body)
        if not outer.get("Encrypt"):
            raise InvalidRequest("the body has no <Encrypt>")
        plain = self._opened(
            lambda: self.crypto.decrypt_message(outer, signature, timestamp, nonce)
        )
        _fresh(timestamp)
        return read_xml(plain)
