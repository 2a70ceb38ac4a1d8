"""A labelled corpus of support text for the redaction detectors.

Positives: sentences as customers and agents write them, each holding one or more values of a
known kind (``email``, ``phone``, ``card``, ``iban``, ``secret``). Values are drawn from a
seeded generator so the corpus is the same on every run: card numbers pass Luhn under real
issuer prefixes, IBANs pass mod-97 in their country's format, phones are numbers
libphonenumber calls valid, keys have each issuer's real shape.

Hard negatives: identifiers support text is full of and that redaction must leave exactly as
written (error codes, versions, order and ticket ids, configuration keys, documentation URLs,
timestamps, dates, ports, hex hashes, UUIDs, IPs and hostnames with the default policy).

``score`` runs a redactor over the corpus and returns per-kind counts; the test and
``bench/redaction_quality.py`` share it.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass, field

import phonenumbers
from stdnum import iban as stdnum_iban
from stdnum import luhn

from monitor.redaction import Redactor

KINDS = ("email", "phone", "card", "iban", "secret")


@dataclass(frozen=True)
class Sample:
    text: str
    values: tuple[tuple[str, str], ...]  # (raw value as written in text, kind)


# ---------------------------------------------------------------- value generators

_FIRST = ["jane", "omar", "li", "maria", "dmitri", "aisha", "tom", "ines", "kofi", "yuki"]
_LAST = ["doe", "haddad", "wei", "garcia", "ivanov", "khan", "baker", "silva", "mensah", "sato"]
_DOMAINS = [
    "example.com",
    "acme-corp.io",
    "mail.contoso.co.uk",
    "fabrikam.de",
    "gmail.com",
    "outlook.fr",
    "northwind.com.au",
    "billing.initech.net",
    "uni-heidelberg.de",
    "proton.me",
]


def _email(rng: random.Random, i: int) -> str:
    first, last, domain = rng.choice(_FIRST), rng.choice(_LAST), rng.choice(_DOMAINS)
    local = [
        f"{first}.{last}",
        f"{first}{last[0]}",
        f"{first}_{last}{i}",
        f"{first}+support",
        f"{first[0]}.{last}",
        f"{last}.{first}{rng.randint(1, 99)}",
    ][i % 6]
    email = f"{local}@{domain}"
    return email.title() if i % 7 == 3 else email  # some written in capitals


_PHONE_FORMATS = {
    "US": ["({a}) {b}-{c}", "{a}-{b}-{c}", "{a}.{b}.{c}", "+1 {a} {b} {c}", "1-{a}-{b}-{c}"],
}
_INTL_REGIONS = ["GB", "DE", "FR", "IN", "AU", "BR", "JP", "ES", "NL", "SG", "ZA", "MX"]


def _phone(rng: random.Random, i: int) -> str:
    if i % 2 == 0:  # a US number in one of the ways people write it
        while True:
            a = rng.choice(["415", "212", "646", "312", "617", "206", "303", "512", "702"])
            b = f"{rng.randint(2, 9)}{rng.randint(0, 9)}{rng.randint(0, 9)}"
            c = f"{rng.randint(0, 9999):04d}"
            number = phonenumbers.parse(f"+1{a}{b}{c}")
            if phonenumbers.is_valid_number(number):
                return rng.choice(_PHONE_FORMATS["US"]).format(a=a, b=b, c=c)
    region = _INTL_REGIONS[i % len(_INTL_REGIONS)]
    example = phonenumbers.example_number_for_type(region, phonenumbers.PhoneNumberType.MOBILE)
    assert example is not None
    while True:
        national = str(example.national_number)
        national = national[:-3] + f"{rng.randint(0, 999):03d}"
        number = phonenumbers.parse(f"+{example.country_code}{national}")
        if phonenumbers.is_valid_number(number):
            fmt = (
                phonenumbers.PhoneNumberFormat.INTERNATIONAL,
                phonenumbers.PhoneNumberFormat.E164,
            )
            return phonenumbers.format_number(number, fmt[i % 4 == 1])


_CARD_PREFIXES = [
    ("4", 16),
    ("51", 16),
    ("55", 16),
    ("2221", 16),
    ("34", 15),
    ("37", 15),
    ("6011", 16),
    ("35", 16),
    ("4", 13),
    ("62", 19),
]


def _card(rng: random.Random, i: int) -> str:
    prefix, length = _CARD_PREFIXES[i % len(_CARD_PREFIXES)]
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    digits = body + luhn.calc_check_digit(body)
    style = i % 3
    if length == 15:
        groups = [digits[:4], digits[4:10], digits[10:]]
    else:
        groups = [digits[j : j + 4] for j in range(0, length, 4)]
    if style == 0:
        return digits
    return (" " if style == 1 else "-").join(groups)


_IBAN_FORMATS = {  # country: BBAN shape ('n' digit, 'a' capital letter)
    "DE": "n" * 18,
    "NL": "aaaa" + "n" * 10,
    "GB": "aaaa" + "n" * 14,
    "ES": "n" * 20,
    "BE": "n" * 12,
    "AT": "n" * 16,
    "PL": "n" * 24,
    "CH": "n" * 17,
    "IE": "aaaa" + "n" * 14,
    "SE": "n" * 20,
    "DK": "n" * 14,
    "FI": "n" * 14,
    "PT": "n" * 21,
    "NO": "n" * 11,
}


def _iban(rng: random.Random, i: int) -> str:
    countries = list(_IBAN_FORMATS)
    country = countries[i % len(countries)]
    while True:
        bban = "".join(
            rng.choice(string.digits if c == "n" else string.ascii_uppercase)
            for c in _IBAN_FORMATS[country]
        )
        check = stdnum_iban.calc_check_digits(f"{country}00{bban}")
        number = f"{country}{check}{bban}"
        if stdnum_iban.is_valid(number):
            return stdnum_iban.format(number) if i % 2 == 0 else number


def _rand(rng: random.Random, n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    while True:
        token = "".join(rng.choice(alphabet) for _ in range(n))
        if any(c.isdigit() for c in token) and any(c.isupper() for c in token):
            return token


def _secret(rng: random.Random, i: int) -> str:
    up_digits = string.ascii_uppercase + string.digits
    shapes = [
        lambda: "sk-proj-" + _rand(rng, 48),
        lambda: "sk-" + _rand(rng, 48),
        lambda: "sk_live_" + _rand(rng, 24),
        lambda: "ghp_" + _rand(rng, 36),
        lambda: "github_pat_" + _rand(rng, 22) + "_" + _rand(rng, 59),
        lambda: (
            f"xoxb-{rng.randint(10**10, 10**11)}-{rng.randint(10**10, 10**11)}-{_rand(rng, 24)}"
        ),
        lambda: "AKIA" + "".join(rng.choice(up_digits) for _ in range(16)),
        lambda: "AIza" + _rand(rng, 35, string.ascii_letters + string.digits + "_-"),
        lambda: "glpat-" + _rand(rng, 20),
        lambda: "Bearer " + _rand(rng, 40),
        lambda: _rand(rng, 40),  # a bare random token pasted from a console
        lambda: "xoxp-" + _rand(rng, 30),
    ]
    return shapes[i % len(shapes)]()


# ---------------------------------------------------------------- sentences

_TEMPLATES = {
    "email": [
        "Hi, my account e-mail is {v} and I can't log in since this morning.",
        "Please send the invoice to {v} instead of the old address.",
        "Customer asked us to reply to {v} (their colleague is on leave).",
        "I changed the admin contact to {v}, but the SSO error E4021 is still there.",
        "Agent: I have sent the reset link to {v}; it expires in 30 minutes.",
        "From: {v}\nSubject: export stuck at 99%",
        "Can you add {v}, to the billing notifications? Thanks!",
        "Our ops alias <{v}> never got the maintenance notice for 10.4.2.",
    ],
    "phone": [
        "You can reach me on {v} between 9 and 5.",
        "Please call back on {v}, ticket INC-0048213.",
        "My mobile is {v} if the call drops again.",
        "Agent: I tried {v} twice but got voicemail.",
        "Phone: {v}\nPreferred contact: phone",
        "The on-call number in our runbook is {v}.",
    ],
    "card": [
        "I was charged twice on my card {v} for order ORD-20931.",
        "Card number {v}, expiry 09/27 - why was the payment declined?",
        "Billing shows the card ending, full number {v}, as expired.",
        "Agent: please don't share card numbers here. Customer: sorry, it's {v}.",
        "refund to {v} please, not to the gift card",
    ],
    "iban": [
        "Please refund to my IBAN {v}.",
        "Our SEPA mandate uses {v}, can you update it?",
        "The direct debit from {v} failed with code MD01.",
        "Bank details: IBAN: {v}\nBIC: COBADEFFXXX",
        "We moved accounts, new one is {v}. Old one closed.",
    ],
    "secret": [
        "Here is the key we use: {v}, it returns 401 on /v1/chat/completions.",
        "curl -H 'Authorization: {v}' https://api.example.com/v2/orders",
        "My .env has OPENAI_API_KEY={v} and it still fails.",
        "Log line: auth failed for token {v} (status 403)",
        "I pasted {v} into the Settings > API page but nothing happens.",
        "api_key: {v}\nendpoint: https://eu.api.acme.io",
    ],
}

_GENERATORS = {"email": _email, "phone": _phone, "card": _card, "iban": _iban, "secret": _secret}
PER_KIND = {"email": 50, "phone": 50, "card": 45, "iban": 42, "secret": 48}


def positives() -> list[Sample]:
    rng = random.Random(23)
    samples: list[Sample] = []
    for kind, n in PER_KIND.items():
        templates = _TEMPLATES[kind]
        for i in range(n):
            value = _GENERATORS[kind](rng, i)
            labelled = value.removeprefix("Bearer ") if value.startswith("Bearer ") else value
            samples.append(
                Sample(templates[i % len(templates)].format(v=value), ((labelled, kind),))
            )
    # mixed: several kinds in one message, one value repeated
    for i in range(12):
        e, p, c = _email(rng, i), _phone(rng, i), _card(rng, i)
        text = (
            f"Customer {e} called from {p} about card {c}. Agent confirmed {e} "
            f"is the login and will call {p} back after KB-40213 is applied."
        )
        samples.append(Sample(text, ((e, "email"), (p, "phone"), (c, "card"))))
    return samples


# Hard negatives: every one must come out of redaction unchanged (default policy).
HARD_NEGATIVES: tuple[str, ...] = (
    # error codes
    "The sync fails with E4021 after the 3rd retry.",
    "Error ERR_CONNECTION_RESET when opening the portal.",
    "Got HTTP 503 then 429 from the gateway.",
    "Windows shows 0x80070005 (access denied) during install.",
    "ORA-12514: TNS:listener does not currently know of service requested",
    "Postgres says SQLSTATE 40P01 deadlock detected.",
    "Exit code 137 means the container was OOM-killed.",
    "AADSTS50105: the signed in user is not assigned to a role",
    "Error code 0xC004F074 on activation",
    "ECONNREFUSED 127.0.0.1:5432 in the worker log",
    "NT_STATUS_ACCESS_DENIED listing the share",
    "KB-40213 explains error E1012 and E1013.",
    "status=STATUS_INVALID_PARAMETER in event 4625",
    "error E-2041-B appears at checkout",
    "CVE-2024-3094 affects xz 5.6.0 and 5.6.1",
    # versions and builds
    "Upgrade to 10.4.2 fixes it; 10.4.1 has the bug.",
    "We are on v2.14.0-rc.1 in staging.",
    "Build 20240315.4 is the first with the fix.",
    "Android 14 (API level 34), app version 7.12.3 (build 71203)",
    "kernel 6.1.0-18-amd64 on Debian 12.5",
    "Chrome 122.0.6261.94 crashes on the upload page",
    "node v20.11.1, npm 10.2.4, react@18.2.0",
    "Python 3.11.8 and pydantic 2.6.4",
    "firmware 4.2.0.1187 on the router",
    "Java 17.0.10+7-LTS with Spring Boot 3.2.3",
    # order and ticket ids
    "Order ORD-2024-558812 has not shipped.",
    "Ticket INC-0048213 was reopened.",
    "Case #48213377 is linked to the incident.",
    "PO number 4500012345 is on the invoice.",
    "Invoice INV-2024-000187 shows the wrong VAT.",
    "RMA 7731-2290-11 was approved.",
    "Shipment tracking 1Z999AA10123456784 shows delivered.",
    "Order id 1234567890123 in the export",
    "Jira PLAT-3381 tracks the fix.",
    "Request id req_8f3a2c91 in the support bundle",
    "Conversation 20231108-00042 escalated to tier 2",
    "Reference number 000123456789 on the bank statement",
    "Subscription sub_1OqXyZ ends on the 30th",
    "account number ACC-00998877 in the CRM",
    "SKU 8806094938401 is out of stock",
    # configuration keys
    "Set kafka.max_poll_interval_ms to 300000.",
    "spring.datasource.hikari.maximum-pool-size=20",
    "Add `CASEWATCH_JUDGE__API_KEY_ENV` to the deployment.",
    "api_key_env: OPENAI_API_KEY",
    "password: <redacted>",
    "token: ${GITHUB_TOKEN}",
    "The flag --max-old-space-size=4096 helps.",
    "feature.flags.enableNewCheckoutFlowV2 is true",
    "Set AWS_DEFAULT_REGION=eu-west-1 and AWS_PROFILE=prod",
    "log_level: debug, retention_days: 30",
    "client_secret: ${AZURE_CLIENT_SECRET}",
    "ulimit -n 65536 then restart nginx",
    "vm.max_map_count=262144 is required",
    "x-api-key header is missing",
    "Change sessionTimeoutMinutes from 30 to 60 in appsettings.json",
    # documentation URLs
    "See https://docs.acme.com/kb/KB-40213/reset-sso for the steps.",
    "https://support.contoso.com/en-us/help/4023814",
    "Docs: https://learn.microsoft.com/en-us/azure/active-directory/develop/reference-aadsts-error-codes",
    "https://github.com/acme/agent/issues/3518#issuecomment-1921877345",
    "https://developer.example.com/api/v2/orders/{order_id}/refunds",
    "https://status.acme.io/incidents/7k2x9m4q8n1p",
    "Read https://kafka.apache.org/documentation/#consumerconfigs_max.poll.interval.ms",
    "https://docs.python.org/3/library/re.html#re.VERBOSE",
    "https://www.postgresql.org/docs/15/errcodes-appendix.html",
    "https://example.com/download/agent-10.4.2-x86_64.tar.gz",
    # timestamps and dates
    "It started at 2024-03-15T10:22:01.123Z.",
    "Logged 2024-03-15 10:22:01,337 WARN retrying",
    "Last success 15/03/2024 09:00.",
    "Outage window Mar 15, 2024 10:00-12:30 UTC",
    "epoch 1710498121 in the header",
    "timestamp_ms=1732530000000",
    "Renewal date 2025-01-31",
    "On 03.04.2024 the sync stopped.",
    "Sat, 16 Mar 2024 08:15:30 GMT",
    "between 20240315 and 20240322",
    "cron 0 3 * * 1-5 runs the export",
    "The report for Q1 2024 (01/01/2024 - 31/03/2024)",
    # ports and network identifiers (IPs and hostnames are kept by default)
    "Open port 8443 on the firewall.",
    "It listens on 0.0.0.0:9464 and 127.0.0.1:5432.",
    "Connect to db01.internal.acme.net:5432",
    "The VPN hands out 10.8.0.0/24; gateway 10.8.0.1",
    "kafka-0.kafka-headless.casewatch.svc.cluster.local:9092",
    "Ports 80, 443 and 8080-8089 must be open.",
    "IPv6 fe80::1ff:fe23:4567:890a on eth0",
    "smtp.office365.com port 587 with STARTTLS",
    # hashes and ids
    "sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
    "commit 3e1b2c7a9f0d4e5b6c7d8e9f0a1b2c3d4e5f6a7b fixed it",
    "md5 d41d8cd98f00b204e9800998ecf8427e of the installer",
    "image sha256:4bcff63911fcb4448bd4fdacec207030997caf25e9bea4045fa6c8c44de311d1",
    "UUID 123e4567-e89b-12d3-a456-426614174000 in the payload",
    "tenant 72f988bf-86f1-41af-91ab-2d7cd011db47",
    'ETag "33a64df551425fcc55e4d42a148795d9f25f89d4"',
    "git rev 9fceb02",
    "object id 5f2b7c3e9a1d4e6f8b0c2d4e",
    "pod casewatch-7d9f8b6c5-x2k4p restarted",
    "AbstractSingletonProxyFactoryBean threw an exception",
    "MAX_CONNECTIONS_PER_HOST_DEFAULT is 16",
    "the /var/lib/casewatch/data/turns-2024-03-15.db file",
    "C:\\Program Files\\Acme\\Agent\\logs\\agent-20240315.log",
    "bucket s3://acme-exports-prod-eu-west-1/daily/",
    "Stripe price price_1OqXyZ2eZvKYlo2C in test mode",
    # prose around secrets that holds none
    "Then update the secret: `kubectl create secret tls <name> --cert=fullchain.pem`",
    "Rotate the token: Settings > Developer > Tokens, then restart the agent.",
    "The password: the one you set at signup, not the SSO one.",
    "Set api_key: in the YAML to the name of the env var, not the key itself.",
)


def _more_negatives() -> list[str]:
    """More hard negatives of the same families, generated from fixed seeds."""
    rng = random.Random(2323)
    out = []
    for i in range(110):
        family = i % 11
        if family == 0:
            out.append(f"Error E{rng.randint(1000, 9999)} shows on the dashboard.")
        elif family == 1:
            out.append(
                f"Please try version {rng.randint(1, 12)}.{rng.randint(0, 30)}.{rng.randint(0, 99)}"
            )
        elif family == 2:
            out.append(
                f"Order ORD-{rng.randint(2019, 2026)}-{rng.randint(100000, 999999)} is late."
            )
        elif family == 3:
            out.append(f"Ticket #{rng.randint(10000000, 99999999)} was merged.")
        elif family == 4:
            out.append(f"port {rng.randint(1024, 65535)} is blocked")
        elif family == 5:
            out.append(
                f"{rng.randint(2020, 2026)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T"
                f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}Z"
                " sync failed"
            )
        elif family == 6:
            out.append(f"sha1 {rng.getrandbits(160):040x} of the bundle")
        elif family == 7:
            out.append(f"See https://docs.acme.com/articles/{rng.randint(100000, 999999)}-reset")
        elif family == 8:
            out.append(f"request_id={rng.getrandbits(64):016x} in the logs")
        elif family == 9:
            out.append(f"epoch_ms {rng.randint(1_600_000_000_000, 1_800_000_000_000)} in the event")
        else:
            out.append(f"Invoice {rng.randint(2019, 2026)}{rng.randint(100000, 999999)} was paid")
    return out


def negatives() -> list[str]:
    return list(HARD_NEGATIVES) + _more_negatives()


# ---------------------------------------------------------------- scoring


@dataclass
class KindScore:
    labelled: int = 0
    found: int = 0  # labelled values replaced (recall numerator)
    false_positives: int = 0  # findings of this kind on nothing labelled

    @property
    def recall(self) -> float:
        return self.found / self.labelled if self.labelled else 1.0

    @property
    def precision(self) -> float:
        flagged = self.found + self.false_positives
        return self.found / flagged if flagged else 1.0


@dataclass
class CorpusScore:
    kinds: dict[str, KindScore] = field(default_factory=lambda: {k: KindScore() for k in KINDS})
    missed: list[tuple[str, str]] = field(default_factory=list)  # (kind, value)
    altered: list[tuple[str, str]] = field(default_factory=list)  # (negative, redacted)


def score(redactor: Redactor) -> CorpusScore:
    result = CorpusScore()
    for sample in positives():
        spans = redactor.spans(sample.text)
        labelled_spans = []
        for value, kind in sample.values:
            k = result.kinds[kind]
            starts = _all(sample.text, value)
            for start in starts:
                labelled_spans.append((start, start + len(value)))
                k.labelled += 1
                covered = any(
                    label == kind and f.start <= start and f.end >= start + len(value)
                    for f, label in spans
                )
                if covered:
                    k.found += 1
                else:
                    result.missed.append((kind, value))
        for f, label in spans:
            if not any(f.start < e and s < f.end for s, e in labelled_spans):
                result.kinds.setdefault(label, KindScore()).false_positives += 1
    for text in negatives():
        spans = redactor.spans(text)
        for _, label in spans:
            result.kinds.setdefault(label, KindScore()).false_positives += 1
        if spans:
            result.altered.append(
                (text, ", ".join(f"{label}:{text[f.start : f.end]}" for f, label in spans))
            )
    return result


def _all(text: str, value: str) -> list[int]:
    found, at = [], text.find(value)
    while at >= 0:
        found.append(at)
        at = text.find(value, at + len(value))
    return found
