"""Token identifiers (keys, URLs, hosts, names, flags, ports, ids, numbers): extraction, and
near misses of each kind, through the public ``extract`` / ``check`` of identifiers.py."""

import pytest

from monitor.judging.heuristic.identifiers import (
    Identifier,
    IdKind,
    check,
    extract,
    find_near_miss,
    normalise,
)
from monitor.judging.heuristic.tokens import fills_template


def of_kind(text: str, kind: IdKind) -> list[str]:
    return [i.raw for i in extract(text) if i.kind is kind]


def ident(kind: IdKind, raw: str) -> Identifier:
    return Identifier(kind, raw, normalise(kind, raw))


# ---------------------------------------------------------------- extraction, one kind at a time


@pytest.mark.parametrize(
    ("text", "raw"),
    [
        ("set idle_in_transaction_session_timeout to 5min", "idle_in_transaction_session_timeout"),
        ("add FOUNDRY_CACHE_DIR=/data/cache to runner.env", "FOUNDRY_CACHE_DIR"),
        ("raise build.max_context_gb to 8", "build.max_context_gb"),
        (
            'annotate with nginx.ingress.kubernetes.io/proxy-body-size: "50m"',
            "nginx.ingress.kubernetes.io/proxy-body-size",
        ),
        ("lower pollingIntervalSeconds to 30", "pollingIntervalSeconds"),
    ],
)
def test_config_keys(text: str, raw: str) -> None:
    assert of_kind(text, IdKind.CONFIG_KEY) == [raw]


def test_error_code_constants_stay_error_codes() -> None:
    assert of_kind("curl returns ERR_CONN_RESET", IdKind.CONFIG_KEY) == []
    assert of_kind("curl returns ERR_CONN_RESET", IdKind.ERROR_CODE) == ["ERR_CONN_RESET"]


def test_urls_with_their_host_and_port() -> None:
    text = "Test with `curl -v https://cache.foundry.example:9443/health`."
    assert of_kind(text, IdKind.URL) == ["https://cache.foundry.example:9443/health"]
    assert of_kind(text, IdKind.HOSTNAME) == ["cache.foundry.example"]
    assert of_kind(text, IdKind.PORT) == ["9443"]


def test_a_url_keeps_its_placeholders() -> None:
    text = "POST https://api.example.com/v2/projects/{project}/backups/<id>/restore now."
    assert of_kind(text, IdKind.URL) == [
        "https://api.example.com/v2/projects/{project}/backups/<id>/restore"
    ]


@pytest.mark.parametrize(
    ("text", "raw"),
    [
        ("the service runs at auth.internal.corp.example", "auth.internal.corp.example"),
        ("connect to mer-prod-eu1.db.meridiansql.example", "mer-prod-eu1.db.meridiansql.example"),
        ("ping 10.20.0.15 from the host", "10.20.0.15"),
    ],
)
def test_hostnames(text: str, raw: str) -> None:
    assert of_kind(text, IdKind.HOSTNAME) == [raw]


@pytest.mark.parametrize(
    "text", ["upgrade to 4.12.0", "see e.g. the docs", "edit saml.yml", "call client.Init()"]
)
def test_not_hostnames(text: str) -> None:
    assert of_kind(text, IdKind.HOSTNAME) == []


def test_file_names_are_paths() -> None:
    assert of_kind("build fullchain.pem and update saml.yml", IdKind.PATH) == [
        "fullchain.pem",
        "saml.yml",
    ]


@pytest.mark.parametrize(
    ("text", "raw"),
    [
        ("resize vol-data-4417 to 3 TiB", "vol-data-4417"),
        ("logins through gw-fra-02 fail", "gw-fra-02"),
        ("the project p-7781", "p-7781"),
    ],
)
def test_resource_names(text: str, raw: str) -> None:
    assert of_kind(text, IdKind.RESOURCE) == [raw]


def test_hyphenated_words_are_weak_resources() -> None:
    found = [i for i in extract("a built-in read-only pool on vol-a1") if i.kind is IdKind.RESOURCE]
    assert {i.raw: i.weak for i in found} == {"built-in": True, "read-only": True, "vol-a1": False}


def test_flags() -> None:
    assert of_kind("pass --refresh-token-lifetime 3600 and --force", IdKind.FLAG) == [
        "--refresh-token-lifetime",
        "--force",
    ]


@pytest.mark.parametrize(
    ("text", "ports"),
    [
        ("submit on port 587 with STARTTLS", ["587"]),
        ("open ports 443 and 9443", ["443", "9443"]),
        ("outbound TCP 9434 to the cache", ["9434"]),
        ("smtp.postwise.example:465 works", ["465"]),
    ],
)
def test_ports(text: str, ports: list[str]) -> None:
    assert of_kind(text, IdKind.PORT) == ports


def test_times_and_quantities_are_not_ports() -> None:
    assert of_kind("at 09:00 it grows by 50 GB", IdKind.PORT) == []


@pytest.mark.parametrize(
    ("text", "raw"),
    [
        ("user k.lee@contoso.example cannot sign in", "k.lee@contoso.example"),
        ("account acct_51Hq is affected", "acct_51Hq"),
        (
            "trace 123e4567-e89b-12d3-a456-426614174000 failed",
            "123e4567-e89b-12d3-a456-426614174000",
        ),
    ],
)
def test_ids(text: str, raw: str) -> None:
    assert of_kind(text, IdKind.ID) == [raw]


def test_bare_numbers_are_weak() -> None:
    found = [i for i in extract("key tag 48213, algorithm 13") if i.kind is IdKind.NUMBER]
    assert [(i.raw, i.weak) for i in found] == [("48213", True)]


# ---------------------------------------------------------------- near misses of each kind


@pytest.mark.parametrize(
    ("kind", "found", "expected", "reason"),
    [
        (
            IdKind.CONFIG_KEY,
            "idle_in_transaction_session_timout",
            "idle_in_transaction_session_timeout",
            "edit distance 1",
        ),
        (IdKind.CONFIG_KEY, "FOUNDRY_CAHCE_DIR", "FOUNDRY_CACHE_DIR", "transposition"),
        (IdKind.CONFIG_KEY, "max_replication_slot", "max_replication_slots", "edit distance 1"),
        (
            IdKind.CONFIG_KEY,
            "nginx.ingress.kubernetes.io/ssl-redriect",
            "nginx.ingress.kubernetes.io/ssl-redirect",
            "key segment transposition",
        ),
        (
            IdKind.CONFIG_KEY,
            "dunning.per_day.max",
            "dunning.max.per_day",
            "key segments transposed",
        ),
        (
            IdKind.URL,
            "https://api.example.com/v1/invoices/{customer_id}/customers",
            "https://api.example.com/v1/customers/{customer_id}/invoices",
            "path segments transposed",
        ),
        (
            IdKind.URL,
            "https://api.example.com/v2/projects/p-1/restore/{id}/backups",
            "https://api.example.com/v2/projects/{project}/backups/{id}/restore",
            "path segments transposed",
        ),
        (
            IdKind.URL,
            "https://api.example.com/v1/custmers/42",
            "https://api.example.com/v1/customers/42",
            "path segment edit distance 1",
        ),
        (
            IdKind.HOSTNAME,
            "auth.interal.corp.example",
            "auth.internal.corp.example",
            "host segment edit distance 1",
        ),
        (IdKind.HOSTNAME, "gw-fra-20.example", "gw-fra-02.example", "host segment digit swap"),
        (IdKind.RESOURCE, "vol-data-4471", "vol-data-4417", "digit swap"),
        (IdKind.RESOURCE, "builds-2042", "builds-2024", "digit swap"),
        (IdKind.FLAG, "--refresh-token-lifetme", "--refresh-token-lifetime", "edit distance 1"),
        (IdKind.PORT, "9434", "9443", "digit swap"),
        (IdKind.PORT, "578", "587", "digit swap"),
        (IdKind.ID, "k.lea@contoso.example", "k.lee@contoso.example", "edit distance 1"),
        (IdKind.NUMBER, "48231", "48213", "digit swap"),
    ],
)
def test_near_misses_of_each_kind(kind: IdKind, found: str, expected: str, reason: str) -> None:
    miss = find_near_miss(ident(kind, found), [ident(kind, expected)])
    assert miss is not None
    assert miss.reason == reason


@pytest.mark.parametrize(
    ("kind", "found", "expected"),
    [
        # Neighbouring numbers are usually both real: a sibling port, another key tag.
        (IdKind.PORT, "5433", "5432"),
        (IdKind.NUMBER, "86401", "86400"),
        # Short tokens differ by one character all the time.
        (IdKind.FLAG, "--all", "--any"),
        # Another host, another URL.
        (IdKind.URL, "https://a.example.com/v1/x", "https://b.other.org/v1/x"),
        (IdKind.CONFIG_KEY, "max_wal_senders", "max_replication_slots"),
        (IdKind.RESOURCE, "web-frontend", "mobile-app"),
    ],
)
def test_no_false_near_miss(kind: IdKind, found: str, expected: str) -> None:
    assert find_near_miss(ident(kind, found), [ident(kind, expected)]) is None


# ---------------------------------------------------------------- templates and the check


@pytest.mark.parametrize(
    ("found", "template", "fills"),
    [
        ("silo snapshot list --volume vol-1", "silo snapshot list --volume <volume>", True),
        (
            "https://x.example/v1/customers/42/invoices",
            "https://x.example/v1/customers/{id}/invoices",
            True,
        ),
        ("SELECT f('debezium_old');", "SELECT f('<slot_name>');", True),
        ("silo snapshot list --volume vol-1 --all", "silo snapshot list --volume <volume>", False),
        (
            "https://x.example/v1/invoices/42/customers",
            "https://x.example/v1/customers/{id}/invoices",
            False,
        ),
        ("anything", "no placeholder here", False),
    ],
)
def test_templates(found: str, template: str, fills: bool) -> None:
    assert fills_template(found, template) is fills


def test_a_filled_in_command_matches_and_its_resource_is_checked() -> None:
    evidence = "Resize vol-data-4417. List snapshots with `silo snapshot list --volume <volume>`."
    answer = extract("List them: `silo snapshot list --volume vol-data-4471`")
    result = check(answer, extract(evidence), evidence)
    assert [i.kind for i in result.matched] == [IdKind.COMMAND, IdKind.FLAG]
    assert [(m.found.raw, m.expected.raw) for m in result.near_misses] == [
        ("vol-data-4471", "vol-data-4417")
    ]
    assert not result.novel


def test_a_token_present_verbatim_is_matched_whatever_its_extraction() -> None:
    evidence = "The pooler listens on 6432; direct connections use 5432."
    answer = extract("Point DATABASE_URL at port 6432.")
    result = check(answer, extract(evidence), evidence)
    assert [i.raw for i in result.matched] == ["6432"]
    assert [i.raw for i in result.novel] == ["DATABASE_URL"]
