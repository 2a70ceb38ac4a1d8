import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.judging.heuristic.identifiers import (
    Identifier,
    IdKind,
    check,
    extract,
    extract_joined,
    find_near_miss,
    normalise,
)


def kinds(text: str) -> dict[str, IdKind]:
    return {i.raw: i.kind for i in extract(text)}


def ident(kind: IdKind, raw: str) -> Identifier:
    return Identifier(kind, raw, normalise(kind, raw))


# ---------------------------------------------------------------- extraction, one kind at a time


@pytest.mark.parametrize(
    ("text", "raw", "norm"),
    [
        ("The job fails with E4021 every night.", "E4021", "E4021"),
        ("curl returns ERR_CONN_RESET", "ERR_CONN_RESET", "ERR_CONN_RESET"),
        ("VSS fails with 0x80070005 (access denied)", "0x80070005", "0X80070005"),
        ("the portal answers HTTP 503", "HTTP 503", "HTTP 503"),
        ("backends return 502 Bad Gateway", "HTTP 502", "HTTP 502"),
        ("the query raises ORA-00942", "ORA-00942", "ORA00942"),
        ("the installer rolls back with error 1603", "ERROR 1603", "ERROR 1603"),
        ("the client gets ESTALE on the mount", "ESTALE", "ESTALE"),
        ("the array raises VS-2207 path down", "VS-2207", "VS2207"),
    ],
)
def test_error_codes(text: str, raw: str, norm: str) -> None:
    codes = [i for i in extract(text) if i.kind is IdKind.ERROR_CODE]
    assert [(i.raw, i.norm) for i in codes] == [(raw, norm)]


@pytest.mark.parametrize(
    ("text", "norm"),
    [
        ("upgrade to v2.3.1 first", "2.3.1"),
        ("we run 4.12.0 on the media server", "4.12"),
        ("console release 2024.10", "2024.10"),
        ("fixed in version 2.3", "2.3"),
        ("EdgeOS 3.4.1 logs it", "3.4.1"),
    ],
)
def test_versions(text: str, norm: str) -> None:
    assert [i.norm for i in extract(text) if i.kind is IdKind.VERSION] == [norm]


@pytest.mark.parametrize(
    "text",
    [
        "ping 10.20.0.15 from the host",  # an IPv4 address
        "the volume grew by 2.5 GB",  # a quantity
        "about 0.5 seconds later",
        "read /opt/acme/4.12.0/bin/agent",  # a version inside a path is part of the path
    ],
)
def test_numbers_that_are_not_versions(text: str) -> None:
    assert not [i for i in extract(text) if i.kind is IdKind.VERSION]


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("Run `backupctl catalog unlock --force` now.", "backupctl catalog unlock --force"),
        (
            "```bash\n$ vaultctl volume show vol_finance --space\n```",
            "vaultctl volume show vol_finance --space",
        ),
        ("Then:\n$ kubectl -n backuppro get pods\n", "kubectl -n backuppro get pods"),
        ("PS> Restart-Service -Name VSS", "Restart-Service -Name VSS"),
        ("# systemctl restart backuppro-agent", "systemctl restart backuppro-agent"),
        ("Please run systemctl restart acme-agent and wait.", "systemctl restart acme-agent"),
        ("Use kubectl rollout status deploy/api, then retry.", "kubectl rollout status deploy/api"),
        ("Call sudo edgectl bgp clear 198.51.100.1.", "edgectl bgp clear 198.51.100.1"),
    ],
)
def test_commands(text: str, command: str) -> None:
    assert command in [i.norm for i in extract(text) if i.kind is IdKind.COMMAND]


def test_a_markdown_heading_is_not_a_root_prompt() -> None:
    assert not [i for i in extract("# Steps to fix it\nNothing else.") if i.kind is IdKind.COMMAND]


def test_a_path_in_backticks_is_a_path_not_a_command() -> None:
    assert kinds("Open `/var/log/backuppro/agent.log`.") == {
        "/var/log/backuppro/agent.log": IdKind.PATH
    }


@pytest.mark.parametrize(
    ("text", "raw"),
    [
        ("Logs are in /var/log/backuppro/media-server.log.", "/var/log/backuppro/media-server.log"),
        ("Check /tmp for leftovers", "/tmp"),
        (
            r"See C:\Program Files\Acme\DirectoryConnector\Logs\sync.log and retry.",
            r"C:\Program Files\Acme\DirectoryConnector\Logs\sync.log",
        ),
    ],
)
def test_paths(text: str, raw: str) -> None:
    assert [i.raw for i in extract(text) if i.kind is IdKind.PATH] == [raw]


@pytest.mark.parametrize(
    "text",
    ["TCP/IP and/or UDP", "see https://support.acme.example/kb/1042", "port ge-0/0/1 is down"],
)
def test_slashes_that_are_not_paths(text: str) -> None:
    assert not [i for i in extract(text) if i.kind is IdKind.PATH]


@pytest.mark.parametrize(
    ("text", "norm"),
    [("see KB12345", "KB12345"), ("per KB-2041", "KB2041"), ("ART-123 says", "ART123")],
)
def test_articles(text: str, norm: str) -> None:
    assert [i.norm for i in extract(text)] == [norm]


def test_articles_are_not_error_codes() -> None:
    assert kinds("KB-2041 and E2041") == {"KB-2041": IdKind.ARTICLE, "E2041": IdKind.ERROR_CODE}


def test_spelling_variants_normalise_to_one_identifier() -> None:
    text = "KB-2041, KB2041, v4.12.0, 4.12, `sudo systemctl restart x`, systemctl restart x."
    assert sorted((i.kind.value, i.norm) for i in extract(text)) == [
        ("article", "KB2041"),
        ("command", "systemctl restart x"),
        ("version", "4.12"),
    ]


# ---------------------------------------------------------------- near-misses


@pytest.mark.parametrize(
    ("kind", "found", "expected", "reason"),
    [
        (IdKind.ERROR_CODE, "E4012", "E4021", "digit swap"),
        (IdKind.ERROR_CODE, "HTTP 520", "HTTP 502", "digit swap"),
        (IdKind.ERROR_CODE, "E4031", "E4021", "edit distance 1"),
        (IdKind.VERSION, "v2.3.1", "v2.3.4", "version contradiction"),
        (IdKind.PATH, "/var/logs/acme/agent.log", "/var/log/acme/agent.log", "edit distance 1"),
        (IdKind.ARTICLE, "KB-1024", "KB-1042", "digit swap"),
        (
            IdKind.COMMAND,
            "backupctl catalog unlock --forced",
            "backupctl catalog unlock --force",
            "flag differs",
        ),
        (
            IdKind.COMMAND,
            "vaultctl expire run --pool primary",
            "vaultctl expire run --pool primary --dry-run",
            "flag --dry-run dropped",
        ),
    ],
)
def test_near_misses(kind: IdKind, found: str, expected: str, reason: str) -> None:
    miss = find_near_miss(ident(kind, found), [ident(kind, expected)])
    assert miss is not None
    assert miss.expected.raw == expected
    assert reason in miss.reason
    assert found in miss.describe() and expected in miss.describe()


def test_the_closest_evidence_identifier_is_named() -> None:
    evidence = [ident(IdKind.ERROR_CODE, "E4121"), ident(IdKind.ERROR_CODE, "E4021")]
    miss = find_near_miss(ident(IdKind.ERROR_CODE, "E4020"), evidence)
    assert miss is not None and miss.expected.raw == "E4021" and miss.distance == 1


@pytest.mark.parametrize(
    ("found", "evidence"),
    [
        # Never across kinds, however close the characters are.
        (ident(IdKind.ARTICLE, "KB4021"), ident(IdKind.ERROR_CODE, "KE4021")),
        (ident(IdKind.VERSION, "4.12.1"), ident(IdKind.ERROR_CODE, "4.12.1")),
        (ident(IdKind.ERROR_CODE, "E4021"), ident(IdKind.PATH, "/E4021")),
        # Present verbatim, or plainly a different identifier of the same kind.
        (ident(IdKind.ERROR_CODE, "E4021"), ident(IdKind.ERROR_CODE, "E4021")),
        (ident(IdKind.ERROR_CODE, "SCIM-409"), ident(IdKind.ERROR_CODE, "SSO-409")),
        (ident(IdKind.VERSION, "5.12.0"), ident(IdKind.VERSION, "4.12.0")),
        (
            ident(IdKind.COMMAND, "systemctl status foo"),
            ident(IdKind.COMMAND, "systemctl start foo"),
        ),
        (ident(IdKind.COMMAND, "vaultctl show pool"), ident(IdKind.COMMAND, "edgectl show pool")),
    ],
)
def test_no_false_near_miss(found: Identifier, evidence: Identifier) -> None:
    assert find_near_miss(found, [evidence]) is None


def test_check_sorts_answer_identifiers() -> None:
    evidence_text = "E4021 on 4.12.0: run `backupctl catalog unlock --force`; see KB-1042."
    answer = extract("E4012 on 4.12.0: run `backupctl catalog unlock --force`; see KB-9999.")
    result = check(answer, extract(evidence_text), evidence_text)
    assert {i.raw for i in result.matched} == {
        "4.12.0",
        "backupctl catalog unlock --force",
        "--force",
    }
    assert [(m.found.raw, m.expected.raw) for m in result.near_misses] == [("E4012", "E4021")]
    assert [i.raw for i in result.novel] == ["KB-9999"]


def test_a_command_written_in_evidence_prose_counts_as_present() -> None:
    evidence_text = "Clear the expired leases with edgectl dhcp clear leases --pool guest --expired"
    answer = extract("Run `edgectl dhcp clear leases --pool guest --expired`.")
    result = check(answer, [], evidence_text)
    assert [i.kind for i in result.matched].count(IdKind.COMMAND) == 1
    assert not result.novel and not result.near_misses


def test_a_prefix_of_an_evidence_command_is_not_the_command() -> None:
    evidence_text = "Run `edgectl dhcp clear leases --pool guest --expired` to free them."
    answer = extract("Run `edgectl dhcp clear leases --pool guest --expire`.")
    result = check(answer, extract(evidence_text), evidence_text)
    assert [i.raw for i in result.matched] == ["--pool"]
    assert [(m.found.kind, m.reason) for m in result.near_misses] == [
        (IdKind.COMMAND, "flag differs: --expire vs --expired"),
        (IdKind.FLAG, "edit distance 1"),
    ]


# ---------------------------------------------------------------- any text


support_text = st.lists(
    st.one_of(
        st.text(max_size=40),
        st.sampled_from(
            [
                "E4021",
                "v2.3.1",
                "`kubectl get pods`",
                "/var/log/x.log",
                "KB-2041",
                "HTTP 503",
                "C:\\Temp\\a b\\c.log",
                "$ systemctl restart x",
                "```\nls -l\n```",
                "error 1603",
                "10.0.0.1",
                "4.12.0",
                "# heading",
                "0xDEADBEEF",
                "--force",
                "`",
            ]
        ),
    ),
    max_size=12,
).map(" ".join)


@settings(max_examples=150, deadline=None)
@given(support_text)
def test_extraction_never_fails_and_normalisation_is_stable(text: str) -> None:
    found = extract(text)
    assert len({(i.kind, i.norm) for i in found}) == len(found)
    for i in found:
        assert i.norm
        assert normalise(i.kind, i.norm) == i.norm


@settings(max_examples=100, deadline=None)
@given(support_text, support_text)
def test_check_accounts_for_every_answer_identifier(answer: str, evidence: str) -> None:
    answer_ids = extract(answer)
    result = check(answer_ids, extract(evidence), evidence)
    assert len(result.matched) + len(result.near_misses) + len(result.novel) == len(answer_ids)
    for miss in result.near_misses:
        assert miss.found.kind is miss.expected.kind
        assert miss.found.norm != miss.expected.norm


# ---------------------------------------------------------------- a history read by message

SEAMS = [
    # What spans a line break, or reads across it, when the line before ends no sentence.
    ["The job failed with status", "404 on the second run."],
    ["It ended with error", "1603 again."],
    ["Please run sudo", "kubectl rollout restart deploy/api now."],
    ["We opened port", "5432 and 5433 on the firewall."],
    ["Upgrade the agent.", "4.12.3 is the release with the fix."],
    ["We are running.", "v4.12 fixed it?"],
    ["```\nsystemctl restart foo", "```\nDone."],
    ["Which version are you running?", "4.12 here."],
    ["Set `max_conn=20` in /etc/app/app.conf.", "Then restart app-server-01 on port 8080."],
    ["See KB-4012.", "ERR_CATALOG_LOCK came back after E4021!", "Retry with --force."],
]


@pytest.mark.parametrize("parts", SEAMS)
def test_a_history_read_by_message_is_read_as_the_joined_text(parts: list[str]) -> None:
    assert extract_joined(parts) == extract("\n".join(parts))


# Messages that often end a sentence (read by message) or end on what may span the seam.
message = st.tuples(
    st.sampled_from(["", "status ", "error ", "sudo ", "port ", "running ", "``` "]),
    support_text,
    st.sampled_from(["", ".", "!", "?", ". ", " status", " error", " running", "\n```"]),
).map("".join)


@settings(max_examples=200, deadline=None)
@given(st.lists(message, min_size=2, max_size=4))
def test_reading_by_message_never_differs_from_the_joined_text(parts: list[str]) -> None:
    assert extract_joined(parts) == extract("\n".join(parts))
