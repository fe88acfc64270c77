"""ClientService's methods as the KVD1 channel numbers them: the position of each RPC in
`service ClientService` of proto/store_client.proto, with its request and response classes."""
from typing import Dict, NamedTuple, Type

from google.protobuf.message import Message

from ._proto import store_client_pb2 as pb


class Method(NamedTuple):
    name: str
    index: int
    request: Type[Message]
    response: Type[Message]


def _methods() -> Dict[str, Method]:
    service = pb.DESCRIPTOR.services_by_name["ClientService"]
    out = {}
    for i, m in enumerate(service.methods):
        req = getattr(pb, m.input_type.name, None) or _message_class(m.input_type)
        res = getattr(pb, m.output_type.name, None) or _message_class(m.output_type)
        out[m.name] = Method(m.name, i, req, res)
    return out


def _message_class(descriptor) -> Type[Message]:
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(descriptor)


METHODS: Dict[str, Method] = _methods()


def plain_key(key) -> bool:
    """A key every store service and master takes (printable ASCII, at most 4096 bytes; the
    repository's common/key-rules.ts allows more): calls that go another way than the real client
    (batches of many callers, lookups at the master) take only these, and leave any other key to
    the real client, which names what is wrong with it."""
    return isinstance(key, str) and 0 < len(key) <= 4096 and key.isascii() and key.isprintable()
