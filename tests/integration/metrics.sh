#!/usr/bin/env bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# metrics: brmrctl metrics of the client and of a member, after writes,
# parsed by the Prometheus client library's own text parser
# (python3-prometheus-client): every family has a type, counters are
# counters, the labels name pool, member and peer, and the numbers agree
# with the JSON status and with what was written.
# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"

need nbdsh timeout
need_bins
"$PY" -c 'import prometheus_client.parser' 2>/dev/null ||
	skip "python3-prometheus-client is not installed"

pool_up --members 2 --size 64M --name metrics1
mkdir -p "$WORK/pools.d"
ln -s "$PDIR/pool.conf" "$WORK/pools.d/metrics1.conf"
export BRMR_CONFIG_DIR=$WORK/pools.d

log "write 2 MiB, read 1 MiB"
nbdsh -u "$URI" -c 'h.pwrite(b"\xa5" * (2 << 20), 0); h.flush(); h.pread(1 << 20, 0)' ||
	fail "nbdsh I/O failed"

timeout 10 "$BRMRCTL" metrics --socket "$PDIR/client.ctl" >"$WORK/client.prom" ||
	fail "brmrctl metrics (client) failed"
timeout 10 "$BRMRCTL" metrics --pool metrics1 --member 1 >"$WORK/m1.prom" ||
	fail "brmrctl metrics --pool --member 1 failed"
timeout 10 "$BRMRCTL" status --socket "$PDIR/m1.ctl" --json >"$WORK/m1.json" ||
	fail "brmrctl status --json (member 1) failed"

log "parse both with prometheus_client"
"$PY" - "$WORK/client.prom" "$WORK/m1.prom" "$WORK/m1.json" <<'EOF' || fail "the metrics are wrong"
import json, sys
from prometheus_client.parser import text_string_to_metric_families

def parse(path):
    text = open(path).read()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    assert fams, "no metric families in %s" % path
    for f in fams.values():
        assert f.type in ("counter", "gauge"), (f.name, f.type)
        assert f.documentation, "no HELP for %s" % f.name
        assert f.name.startswith(("rmr_", "brmr_")), f.name
        for s in f.samples:
            if f.type == "counter":
                assert s.name == f.name + "_total", s.name
            assert s.value >= 0, s
    return fams

def sample(fams, name, **labels):
    fam = fams[name[:-6] if name.endswith("_total") and name[:-6] in fams else name]
    hits = [s for s in fam.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(hits) == 1, "%s%s: %d samples" % (name, labels, len(hits))
    return hits[0].value

c = parse(sys.argv[1])
m = parse(sys.argv[2])
st = json.load(open(sys.argv[3]))["pools"][0]

assert c["rmr_client_member_writes"].type == "counter"
assert c["rmr_client_member_state"].type == "gauge"
for mid in ("1", "2"):
    assert sample(c, "rmr_client_member_state", pool="metrics1", member=mid, state="normal") == 1
    assert sample(c, "rmr_client_member_state", pool="metrics1", member=mid, state="failed") == 0
    wb = sample(c, "rmr_client_member_write_bytes_total", pool="metrics1", member=mid)
    assert wb >= 2 << 20, "member %s: %d bytes written" % (mid, wb)
    assert sample(c, "rmr_client_member_resync_bytes_total", pool="metrics1", member=mid) == 0
assert sample(c, "rmr_client_members_normal", pool="metrics1") == 2
assert sample(c, "rmr_client_pool_size_bytes", pool="metrics1") == 64 << 20
reads = sum(sample(c, "rmr_client_member_read_bytes_total", pool="metrics1", member=i)
            for i in ("1", "2"))
assert reads >= 1 << 20, reads

assert sample(m, "rmr_server_write_bytes_total", pool="metrics1", member="1") == st["write_bytes"]
assert sample(m, "rmr_server_writes_total", pool="metrics1", member="1") == st["writes"]
assert sample(m, "rmr_server_map_version", pool="metrics1", member="1") == st["map_ver"]
assert sample(m, "rmr_server_dirty_chunks", pool="metrics1", member="1", peer="2") == 0
assert sample(m, "rmr_server_peer_connected", pool="metrics1", member="1", peer="2") == 1
assert m["rmr_server_resync_bytes"].type == "counter"
print("client: %d families, member 1: %d families; values agree" % (len(c), len(m)))
EOF

log "'status prometheus' on the control socket is the same text"
ctl "$PDIR/client.ctl" "status prometheus" | grep -q '^# TYPE rmr_client_member_state gauge$' ||
	fail "the control socket does not answer 'status prometheus'"
log "PASS"
