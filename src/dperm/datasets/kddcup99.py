"""KDD Cup 1999 (10 % subset): schema and loader."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._rng import check_random_state
from .._validation import check_count
from ..exceptions import InvalidDataError
from ._files import _find_file, _resolve_data_home
from ._prepare import _check_test_size, _finish_schema, _norm_text
from .schema import CategoricalColumn, NumericColumn, Schema, _cat, _num

_KDD_COLUMNS = (
    "duration protocol_type service flag src_bytes dst_bytes land wrong_fragment urgent hot "
    "num_failed_logins logged_in num_compromised root_shell su_attempted num_root "
    "num_file_creations num_shells num_access_files num_outbound_cmds is_host_login "
    "is_guest_login count srv_count serror_rate srv_serror_rate rerror_rate srv_rerror_rate "
    "same_srv_rate diff_srv_rate srv_diff_host_rate dst_host_count dst_host_srv_count "
    "dst_host_same_srv_rate dst_host_diff_srv_rate dst_host_same_src_port_rate "
    "dst_host_srv_diff_host_rate dst_host_serror_rate dst_host_srv_serror_rate "
    "dst_host_rerror_rate dst_host_srv_rerror_rate"
).split()
_KDD_PROTOCOLS = "icmp tcp udp".split()
_KDD_SERVICES = (
    "IRC X11 Z39_50 auth bgp courier csnet_ns ctf daytime discard domain domain_u echo eco_i "
    "ecr_i efs exec finger ftp ftp_data gopher hostnames http http_443 imap4 iso_tsap klogin "
    "kshell ldap link login mtp name netbios_dgm netbios_ns netbios_ssn netstat nnsp nntp "
    "ntp_u other pm_dump pop_2 pop_3 printer private red_i remote_job rje shell smtp sql_net "
    "ssh sunrpc supdup systat telnet tftp_u tim_i time urh_i urp_i uucp uucp_path vmnet whois"
).split()
_KDD_FLAGS = "OTH REJ RSTO RSTOS0 RSTR S0 S1 S2 S3 SF SH".split()
_KDD_BINARY = {"land", "logged_in", "root_shell", "su_attempted", "is_host_login", "is_guest_login"}
_KDD_CONTENT_COUNTS = {
    "wrong_fragment",
    "urgent",
    "hot",
    "num_failed_logins",
    "num_compromised",
    "num_root",
    "num_file_creations",
    "num_shells",
    "num_access_files",
    "num_outbound_cmds",
}


def _kdd_schema() -> Schema:
    cols: list[NumericColumn | CategoricalColumn] = []
    for name in _KDD_COLUMNS:
        if name == "protocol_type":
            cols.append(_cat(name, _KDD_PROTOCOLS, "kddcup.names (symbolic; 3 protocols)"))
        elif name == "service":
            cols.append(_cat(name, _KDD_SERVICES, "KDD'99 10% data documentation (66 services)"))
        elif name == "flag":
            cols.append(_cat(name, _KDD_FLAGS, "KDD'99 documentation (11 connection states)"))
        elif name == "duration":
            cols.append(_num(name, 0, 604800, "seconds; public cap one week; log1p", log=True))
        elif name in ("src_bytes", "dst_bytes"):
            cols.append(_num(name, 0, 2.0**32, "bytes; public cap 2^32 (4 GiB); log1p", log=True))
        elif name in _KDD_BINARY:
            cols.append(_num(name, 0, 1, "KDD task description: 1 if …, 0 otherwise"))
        elif name in _KDD_CONTENT_COUNTS:
            cols.append(_num(name, 0, 1000, "content count; generous public cap 1000; log1p", True))
        elif name in ("count", "srv_count"):
            cols.append(_num(name, 0, 511, "connections in a 2 s window, documented max 511"))
        elif name in ("dst_host_count", "dst_host_srv_count"):
            cols.append(_num(name, 0, 255, "host-based window count, documented max 255"))
        elif name.endswith("_rate"):
            cols.append(_num(name, 0, 1, "a rate (fraction of connections)"))
        else:  # pragma: no cover - every KDD column is listed above
            raise AssertionError(name)
    return Schema(tuple(cols))


_KDD_SCHEMA = _kdd_schema()


def _load_kddcup99(
    data_home=None,
    *,
    normalize_rows=True,
    random_state=0,
    n_samples=70000,
    test_size=0.2,
    bounds=None,
):
    home = _resolve_data_home(data_home)
    path = _find_file(home, "kddcup99", "kddcup.data_10_percent")
    test_size = _check_test_size(test_size)
    if n_samples is not None:
        n_samples = check_count(n_samples, "n_samples", minimum=2)
    schema = _KDD_SCHEMA.with_bounds(bounds)
    names = [*_KDD_COLUMNS, "label"]
    dtypes = {c: "float64" for c in _KDD_COLUMNS}
    for c in ("protocol_type", "service", "flag", "label"):
        dtypes[c] = "category"
    frame = pd.read_csv(path, header=None, names=names, dtype=dtypes, engine="c")
    n = len(frame)
    if n_samples is None:
        n_samples = n
    if n_samples > n:
        raise InvalidDataError(f"n_samples={n_samples} exceeds the {n} rows of {path}")
    rng = check_random_state(random_state)
    idx = rng.choice(n, size=n_samples, replace=False)  # uniform, in random order
    n_test = round(test_size * n_samples)
    tr_idx, te_idx = idx[n_test:], idx[:n_test]
    y = np.where(frame["label"].to_numpy(dtype=str) == "normal.", -1.0, 1.0)
    desc = (
        f"KDD Cup 1999, 10% subset ({n} rows). Binary task: attack → +1, normal. → −1. "
        f"Protocol of Iyengar et al. (2019): {n_samples} rows sampled uniformly without "
        f"replacement (random_state={random_state!r}), split {1 - test_size:g}/{test_size:g}. "
        + _norm_text(schema, normalize_rows)
    )
    return _finish_schema(
        "kddcup99",
        schema,
        frame.iloc[tr_idx],
        frame.iloc[te_idx] if n_test else None,
        y[tr_idx],
        y[te_idx] if n_test else None,
        "binary",
        normalize_rows,
        None,
        desc,
    )
