from __future__ import annotations

import pytest
from pydantic import SecretStr

from consumers._kafka import _host_port, broker_errors, client_options, kafka
from monitor.config.kafka import KafkaConfig
from monitor.errors import BrokerError


def test_client_options_pass_security_settings_through() -> None:
    cfg = KafkaConfig(
        bootstrap_servers=["a:9093", "b:9093"],
        client_id="cw",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username="svc",
        sasl_password=SecretStr("hunter2"),
    )
    assert client_options(cfg) == {
        "bootstrap_servers": ["a:9093", "b:9093"],
        "client_id": "cw",
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "svc",
        "sasl_plain_password": "hunter2",
    }


def test_plaintext_options_carry_no_sasl_keys() -> None:
    assert set(client_options(KafkaConfig())) == {
        "bootstrap_servers",
        "client_id",
        "security_protocol",
    }


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        ("broker:9093", ("broker", 9093)),
        ("broker", ("broker", 9092)),
        ("[::1]:9094", ("::1", 9094)),
        ("[::1]", ("::1", 9092)),
    ],
)
def test_host_port(server: str, expected: tuple[str, int]) -> None:
    assert _host_port(server) == expected


def test_kafka_errors_become_broker_errors_naming_action_and_servers() -> None:
    with (
        pytest.raises(BrokerError, match=r"committing offsets: Kafka at a:1,b:2 failed") as info,
        broker_errors("committing offsets", ["a:1", "b:2"]),
    ):
        raise kafka.errors.CommitFailedError("generation changed")
    assert isinstance(info.value.__cause__, kafka.errors.CommitFailedError)
    with (
        pytest.raises(BrokerError, match="timed out talking to Kafka at x:1"),
        broker_errors("polling", "x:1"),
    ):
        raise kafka.errors.KafkaTimeoutError()
