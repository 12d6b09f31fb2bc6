#!/usr/bin/env python3
"""run.py: does one tenant's abuse slow down another tenant's API calls?

Why this exists: isostack issue 12 ("Tests and figures"). The promise is that no
tenant can hurt another; the issue measured the opposite (another tenant's
healthz went from 0.12 ms to a 252 ms median under a pending flood). This
script measures it end to end on a real isostackd, as a ratio against a quiet
baseline taken in the same run, so the numbers can be compared before and after
the daemon's fixes (per-tenant limits, per-address connection limits, header
deadlines, audit aggregation, incremental queue).

    python3 bench/abuse/run.py [--build build] [--quick] [--json PATH]
                               [--phases anon,slow,pending] [--phase-s S]
                               [--baseline-s S] [--after-s S]
                               [--pending-cap 2600] [--pending-conns 4]
                               [--pending-fill-s S] [--attacker-max-pending N]
                               [--slow-conns 1000] [--slow-sources 1]
                               [--anon-procs 4] [--victim-timeout S]

What it does (everything on loopback, in one temp dir, stopped and removed on
any exit, Ctrl-C included):
  1. Starts isostackd (examples/cluster.yaml, fresh state dir, a free port on
     127.0.0.1) and, as cluster-admin, creates two tenants, `attacker` and
     `victim`, each with a tenant-user token. No quotas are set (unlimited).
  2. The victim, from source address 127.0.0.2 (another client than the
     attacker's 127.0.0.1, so a per-address limit on the attacker does not hit
     it), runs two probes in parallel, each on a fresh connection per request:
       healthz  GET /v1/healthz without a token, every 10 ms;
       create   POST /v1/allocations (one 1g.10gb in pool mig) with its token,
                every 20 ms, released (DELETE) right after so nothing fills.
     A request that gets no HTTP answer within --victim-timeout (timeout,
     refused, reset) or a non-2xx answer counts as failed; failures count as
     infinitely slow in the percentiles (p99 is "fail" when more than 1% fail).
  3. Baseline: the probes alone for --baseline-s.
  4. Each phase: the attacker runs for --phase-s in its own processes, while the
     probes run; then the attack stops and the probes run --after-s more
     ("after", to show recovery). Phases, in the default order:
       anon     --anon-procs processes send anonymous requests (GET
                /v1/allocations, 401) at full speed on keep-alive connections.
       slow     --slow-conns connections that each send a byte a second of a
                request header that never ends (spread over --slow-sources
                source addresses 127.0.1.x when more than one; the script
                raises its own RLIMIT_NOFILE). Closed ones are reopened each
                second, so the attacker keeps trying to hold them all.
       pending  "pending (fill)": --pending-conns keep-alive connections
                create allocations of 8 whole GPUs in pool gpu (the first 8
                fill rack A, the rest wait `pending`) up to --pending-cap
                pending, or until the daemon refuses (429/422: a per-tenant
                limit: the daemon's default, or --attacker-max-pending set by
                the admin), or for at most --pending-fill-s; this window ends when
                the fill does. "pending": for --phase-s, the same connections
                churn: release the oldest pending one, create another (or try
                to: refusals are counted). The pending phase runs last because
                its queue stays behind (its "after" row shows the daemon
                holding that queue, quiet).
       busy     (not in the default list: --phases busy) for comparison,
                legitimate heavy use at the same rate: --pending-conns
                connections create one whole GPU in pool gpu (placed at once)
                and release it, back to back; nothing stays pending.
     The attackers count every outcome: status codes (429 and 422 included),
     connection refused or reset, timeouts.
  5. Prints a table (p50/p99 per probe and phase, ratio phase p99 / baseline
     p99; goal: within 2x) and writes everything to JSON (--json; default
     BUILD/abuse-bench.json): the commit, parameters, the machine, the daemon's
     open-file limit, per phase the victim's outcomes, the attacker's counters,
     the state dir's growth and the daemon's stderr lines.

--quick: 4 s baseline, 8 s phases, 2 s after, fill at most 12 s (under a
minute in all). Default: 15 s baseline, 25 s phases, 4 s after, fill at most
45 s (under 3 minutes).

Exit 0 when every phase ran (whatever the ratios: timing is reported, never
asserted), 1 when the daemon died, did not stop cleanly on SIGTERM, left a
sanitizer report in its stderr (run it on build-asan to look for those), or
the set-up failed.

--self-test checks the accounting the figures rest on, against fake servers
that refuse (429 with Connection: close, a close without an answer, a 408),
with no daemon and no timing: failures count as infinitely slow, and every
refusal an attacker meets is counted. It runs with the unit tests
(`meson test abuse_selftest`); the bench itself is `meson test --benchmark
abuse` / `abuse-quick`.

The attackers run in processes of their own (this file with --worker KIND,
its parameters as JSON on stdin, its counters as JSON on stdout), so
their Python work does not hold the probes' GIL; on a small machine they still
share its cores with the daemon and the probes: say which machine numbers come
from.
"""

import argparse
import errno
import http.client
import json
import math
import os
import platform
import resource
import selectors
import socket
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "api"))

VICTIM_SRC = "127.0.0.2"
ATTACKER_SRC = "127.0.0.1"
PROBE_BODY = {"name": "probe", "gpus": {"count": 1, "profile": "1g.10gb"}, "pool": "mig"}
FLOOD_BODY = {"name": "flood", "gpus": {"count": 8, "whole": True}, "pool": "gpu"}
BUSY_BODY = {"name": "busy", "gpus": {"count": 1, "whole": True}, "pool": "gpu"}
HEALTHZ_GAP_S = 0.010
CREATE_GAP_S = 0.020


# ---------------------------------------------------------------- HTTP


def outcome_of_exception(e):
    """A short name for a transport failure."""
    if isinstance(e, (socket.timeout, TimeoutError)):
        return "timeout"
    if isinstance(e, ConnectionRefusedError):
        return "refused"
    if isinstance(e, (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected,
                      http.client.IncompleteRead, ConnectionAbortedError)):
        return "reset"
    if isinstance(e, OSError) and e.errno:
        return "error:" + errno.errorcode.get(e.errno, str(e.errno))
    return "error:" + type(e).__name__


def one_request(port, method, path, body=None, token=None, src=None, timeout=5.0):
    """One request on a fresh connection. Returns (outcome, seconds, status,
    parsed JSON or None): outcome "ok" for 2xx, "http_NNN" otherwise, or the
    transport failure's name."""
    headers = {}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = "Bearer " + token
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout,
                                      source_address=(src, 0) if src else None)
    try:
        conn.request(method, path, body=data, headers=headers)
        r = conn.getresponse()
        raw = r.read()
        dt = time.perf_counter() - t0
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        return ("ok" if 200 <= r.status < 300 else "http_%d" % r.status), dt, r.status, parsed
    except (OSError, http.client.HTTPException) as e:
        return outcome_of_exception(e), time.perf_counter() - t0, None, None
    finally:
        conn.close()


class KeepAlive:
    """One keep-alive connection that reconnects after a failure."""

    def __init__(self, port, src, timeout):
        self.port, self.src, self.timeout = port, src, timeout
        self.conn = None

    def request(self, method, path, body=None, token=None):
        """(outcome, status, parsed JSON or None, error code or None)."""
        headers = {}
        data = None
        if body is not None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if token:
            headers["Authorization"] = "Bearer " + token
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout,
                                                       source_address=(self.src, 0))
            self.conn.request(method, path, body=data, headers=headers)
            r = self.conn.getresponse()
            raw = r.read()
            if r.getheader("Connection", "").lower() == "close":
                self.close()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            return outcome_of_exception(e), None, None, None
        parsed = None
        code = None
        if raw:
            try:
                parsed = json.loads(raw)
                if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
                    code = parsed["error"].get("code")
            except ValueError:
                pass
        return ("ok" if 200 <= r.status < 300 else "http_%d" % r.status), r.status, parsed, code

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def bump(d, key, n=1):
    d[key] = d.get(key, 0) + n


# ---------------------------------------------------------------- attackers (--worker)


def worker_anon(p):
    """Anonymous requests at full speed on one keep-alive connection."""
    c = KeepAlive(p["port"], ATTACKER_SRC, 5.0)
    out = {"requests": 0, "outcomes": {}}
    while time.time() < p["deadline"]:
        outcome, _, _, _ = c.request("GET", "/v1/allocations")
        out["requests"] += 1
        bump(out["outcomes"], outcome)
        if outcome not in ("ok",) and not outcome.startswith("http_"):
            time.sleep(0.01)  # the daemon refused the connection: retry soon, not in a spin
    c.close()
    return out


def raise_nofile(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = need if hard == resource.RLIM_INFINITY else min(need, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def worker_slow(p):
    """Holds N connections that each send one header byte a second."""
    n = p["conns"]
    sources = p["sources"]
    limit = raise_nofile(n + 256)
    prefix = b"GET /v1/healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
    sel = selectors.DefaultSelector()
    conns = {}  # fd -> [socket, state "connecting"|"open", since]
    out = {"nofile": limit, "opened": 0, "connect_failed": {}, "closed_by_server": 0,
           "send_failed": {}, "responses": {}, "max_open": 0, "open_per_s": []}
    k = 0

    def drop(fd):
        s = conns.pop(fd)[0]
        try:
            sel.unregister(s)
        except (KeyError, ValueError):
            pass
        s.close()

    while time.time() < p["deadline"]:
        tick = time.time()
        # Top up to N (the attacker keeps trying), at most 1,000 new ones a tick.
        for _ in range(min(1000, n - len(conns))):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            try:
                s.bind((sources[k % len(sources)], 0))
                k += 1
                rc = s.connect_ex(("127.0.0.1", p["port"]))
            except OSError as e:
                bump(out["connect_failed"], outcome_of_exception(e))
                s.close()
                break  # out of ports or descriptors: try again next tick
            if rc not in (0, errno.EINPROGRESS):
                bump(out["connect_failed"], errno.errorcode.get(rc, str(rc)))
                s.close()
                continue
            conns[s.fileno()] = [s, "connecting", tick]
        # Advance every connection by one byte.
        n_open = 0
        for fd in list(conns):
            s, state, since = conns[fd]
            if state == "connecting":
                err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if err:
                    bump(out["connect_failed"], errno.errorcode.get(err, str(err)))
                    drop(fd)
                    continue
                try:
                    s.getpeername()
                except OSError:
                    if tick - since > 10:
                        bump(out["connect_failed"], "timeout")
                        drop(fd)
                    continue
                data = prefix
                conns[fd][1] = "open"
                out["opened"] += 1
                sel.register(s, selectors.EVENT_READ)
            else:
                data = b"a"
            try:
                s.send(data)
                n_open += 1
            except BlockingIOError:
                n_open += 1
            except OSError as e:
                bump(out["send_failed"], outcome_of_exception(e))
                drop(fd)
        out["max_open"] = max(out["max_open"], n_open)
        out["open_per_s"].append(n_open)
        # Until the next tick: notice what the server says or closes.
        while True:
            left = tick + 1.0 - time.time()
            if left <= 0 or time.time() >= p["deadline"]:
                break
            for key, _ in sel.select(timeout=min(left, p["deadline"] - time.time())):
                s = key.fileobj
                try:
                    data = s.recv(4096)
                except OSError:
                    data = b""
                if data:
                    line = data.split(b"\r\n", 1)[0].decode("latin-1")
                    parts = line.split()
                    bump(out["responses"], parts[1] if len(parts) > 1 else "garbage")
                else:
                    out["closed_by_server"] += 1
                if s.fileno() in conns:
                    drop(s.fileno())
    for fd in list(conns):
        drop(fd)
    return out


def worker_pending(p):
    """Mode "fill": creates pending work until the cap or the daemon's limit
    (429/422), then returns the pending ids. Mode "churn": from those ids,
    releases the oldest pending one and creates another, again and again."""
    lock = threading.Lock()
    fill = p["mode"] == "fill"
    st = {"pending": list(p.get("ids", [])), "held": [], "created_pending": 0,
          "created_placed": 0, "released": 0, "create_outcomes": {}, "release_outcomes": {},
          "max_pending": 0, "cap_reached_s": None, "limited": 0, "pending_per_s": []}
    st["mode"] = p["mode"]
    st["pending_start"] = st["max_pending"] = len(st["pending"])
    limited_before = p.get("limited", False)
    t_start = time.time()

    def victim_of_churn():
        with lock:
            return st["pending"].pop(0) if st["pending"] else None

    def loop():
        c = KeepAlive(p["port"], ATTACKER_SRC, 30.0)
        while time.time() < p["deadline"]:
            with lock:
                full = len(st["pending"]) >= p["cap"] or st["limited"] > 0 or limited_before
            if full and fill:
                break
            if full:
                aid = victim_of_churn()
                if aid is not None:
                    outcome, _, _, code = c.request("DELETE", "/v1/allocations/" + aid,
                                                    token=p["token"])
                    with lock:
                        bump(st["release_outcomes"], outcome if code is None else
                             "%s:%s" % (outcome, code))
                        if outcome == "ok":
                            st["released"] += 1
                        elif outcome.startswith("http_"):
                            pass  # refused: forget it
                        else:
                            st["pending"].append(aid)  # no answer: try it again later
            outcome, status, body, code = c.request("POST", "/v1/allocations", FLOOD_BODY,
                                                    token=p["token"])
            with lock:
                bump(st["create_outcomes"], outcome if code is None else
                     "%s:%s" % (outcome, code))
                if outcome == "ok" and isinstance(body, dict):
                    if body.get("state") == "pending":
                        st["pending"].append(body["id"])
                        st["created_pending"] += 1
                    else:
                        st["held"].append(body["id"])
                        st["created_placed"] += 1
                    if len(st["pending"]) > st["max_pending"]:
                        st["max_pending"] = len(st["pending"])
                    if st["cap_reached_s"] is None and len(st["pending"]) >= p["cap"]:
                        st["cap_reached_s"] = round(time.time() - t_start, 2)
                elif status in (429, 422):
                    st["limited"] += 1
                    if st["cap_reached_s"] is None:
                        st["cap_reached_s"] = round(time.time() - t_start, 2)
            if not outcome.startswith("http_") and outcome != "ok":
                time.sleep(0.01)
        c.close()

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(p["conns"])]
    for t in threads:
        t.start()
    next_sample = time.time()
    while any(t.is_alive() for t in threads):
        if time.time() >= next_sample:
            with lock:
                st["pending_per_s"].append(len(st["pending"]))
            next_sample += 1.0
        time.sleep(0.05)
        if time.time() > p["deadline"] + 35:
            break  # a request stuck past its own timeout: report what we have
    st["pending_end"] = len(st["pending"])
    st["held_end"] = len(st["held"])
    if fill:
        st["pending_ids"] = st["pending"]
    del st["pending"], st["held"]
    return st


def worker_busy(p):
    """Legitimate heavy use, for comparison with the pending flood: on each
    connection, create one whole GPU in pool gpu (placed at once) and release
    it, back to back. The same write rate with nothing left pending."""
    lock = threading.Lock()
    st = {"created": 0, "released": 0, "create_outcomes": {}, "release_outcomes": {}}

    def loop():
        c = KeepAlive(p["port"], ATTACKER_SRC, 30.0)
        while time.time() < p["deadline"]:
            outcome, _, body, code = c.request("POST", "/v1/allocations", BUSY_BODY,
                                               token=p["token"])
            with lock:
                bump(st["create_outcomes"], outcome if code is None else
                     "%s:%s" % (outcome, code))
            if outcome == "ok" and isinstance(body, dict):
                with lock:
                    st["created"] += 1
                outcome, _, _, code = c.request("DELETE", "/v1/allocations/" + body["id"],
                                                token=p["token"])
                with lock:
                    bump(st["release_outcomes"], outcome if code is None else
                         "%s:%s" % (outcome, code))
                    if outcome == "ok":
                        st["released"] += 1
            elif not outcome.startswith("http_"):
                time.sleep(0.01)
        c.close()

    threads = [threading.Thread(target=loop, daemon=True) for _ in range(p["conns"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(0, p["deadline"] - time.time()) + 35)
    return st


WORKERS = {"anon": worker_anon, "slow": worker_slow, "pending": worker_pending,
           "busy": worker_busy}


def worker_main(kind):
    p = json.load(sys.stdin)  # not argv: the churn's list of ids may be long
    try:
        result = WORKERS[kind](p)
    except Exception as e:  # noqa: BLE001 - reported to the parent, not lost
        result = {"worker_error": "%s: %s" % (type(e).__name__, e)}
    sys.stdout.write(json.dumps(result))
    sys.stdout.flush()


# ---------------------------------------------------------------- the victim


class Probe:
    """A victim probe: one request on a fresh connection, again and again,
    each sample tagged with the window it belongs to."""

    def __init__(self, name, port, token, timeout):
        self.name, self.port, self.token, self.timeout = name, port, token, timeout
        self.window = None  # samples go to this window's list
        self.samples = {}  # window -> [(outcome, seconds)]
        self.extra = {}  # window -> counters (create probe: pending answers, release outcomes)
        self.leftover = []  # allocation ids whose release got no answer
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def set_window(self, w):
        with self.lock:
            self.window = w
            if w is not None:
                self.samples.setdefault(w, [])
                self.extra.setdefault(w, {})

    def current(self):
        with self.lock:
            return self.window

    def record(self, w, outcome, dt, extra=None):
        """Files a sample under the window its request started in (`w`), so a
        request that an attack stalls counts against that attack even when it
        ends (or times out) after it."""
        if w is None:
            return
        with self.lock:
            self.samples[w].append((outcome, dt))
            if extra:
                bump(self.extra[w], extra)

    def run(self):
        while not self.stop.is_set():
            if self.name == "healthz":
                w = self.current()
                outcome, dt, _, _ = one_request(self.port, "GET", "/v1/healthz", src=VICTIM_SRC,
                                                timeout=self.timeout)
                self.record(w, outcome, dt)
                self.stop.wait(HEALTHZ_GAP_S)
            else:
                self.create_once()
                self.stop.wait(CREATE_GAP_S)

    def create_once(self):
        w = self.current()
        outcome, dt, _, body = one_request(self.port, "POST", "/v1/allocations", PROBE_BODY,
                                           self.token, VICTIM_SRC, self.timeout)
        extra = None
        if outcome == "ok" and isinstance(body, dict):
            if body.get("state") != "active":
                extra = "answered_" + str(body.get("state"))
            self.leftover.append(body["id"])
        self.record(w, outcome, dt, extra)
        self.release_leftovers(w)

    def release_leftovers(self, w):
        keep = []
        for aid in self.leftover:
            outcome, dt, _, _ = one_request(self.port, "DELETE", "/v1/allocations/" + aid, None,
                                            self.token, VICTIM_SRC, self.timeout)
            if w is not None:
                with self.lock:
                    bump(self.extra[w], "release_" + outcome)
            if outcome != "ok" and not outcome.startswith("http_4"):
                keep.append(aid)
        self.leftover = keep


def percentile(sorted_vals, q):
    """Nearest rank; None when there are no samples."""
    if not sorted_vals:
        return None
    k = max(0, math.ceil(q * len(sorted_vals)) - 1)
    return sorted_vals[k]


def summarise(samples, extra):
    """p50/p99 over all attempts (a failure counts as infinitely slow) and
    over answered ones; outcome counts."""
    outcomes = {}
    for o, _ in samples:
        bump(outcomes, o)
    all_ms = sorted(dt * 1000 if o == "ok" else math.inf for o, dt in samples)
    ok_ms = sorted(dt * 1000 for o, dt in samples if o == "ok")

    def rnd(v):
        return None if v is None else (v if math.isinf(v) else round(v, 3))

    return {"n": len(samples), "ok": outcomes.get("ok", 0), "outcomes": outcomes,
            "p50_ms": rnd(percentile(all_ms, 0.50)), "p99_ms": rnd(percentile(all_ms, 0.99)),
            "ok_p50_ms": rnd(percentile(ok_ms, 0.50)), "ok_p99_ms": rnd(percentile(ok_ms, 0.99)),
            "ok_max_ms": rnd(ok_ms[-1] if ok_ms else None), "extra": extra}


# ---------------------------------------------------------------- orchestration


def state_bytes(path):
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def count_lines(path):
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return 0


def daemon_nofile(pid):
    try:
        with open("/proc/%d/limits" % pid) as f:
            for line in f:
                if line.startswith("Max open files"):
                    return int(line.split()[3])
    except (OSError, ValueError, IndexError):
        pass
    return None


def git_head():
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return head, bool(dirty)
    except (OSError, subprocess.SubprocessError):
        return None, None


def start_workers(kind, params, n):
    procs = []
    for _ in range(n):
        pr = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", kind],
                              stdout=subprocess.PIPE, stdin=subprocess.PIPE)
        pr.stdin.write(json.dumps(params).encode())
        pr.stdin.close()
        pr.stdin = None  # so that communicate() does not flush it again
        procs.append(pr)
    return procs


def collect_workers(procs, grace_s):
    """Each worker's JSON; a worker past its deadline + grace is killed."""
    results = []
    end = time.time() + grace_s
    for pr in procs:
        try:
            out, _ = pr.communicate(timeout=max(0.1, end - time.time()))
        except subprocess.TimeoutExpired:
            pr.kill()
            out, _ = pr.communicate()
            results.append({"worker_error": "killed after its deadline"})
            continue
        try:
            results.append(json.loads(out))
        except ValueError:
            results.append({"worker_error": "no report (exit %s)" % pr.returncode})
    return results


def merge_counters(results):
    """Sums numbers and dicts of numbers over workers; keeps the rest per worker."""
    if len(results) == 1:
        return results[0]
    merged = {"workers": len(results)}
    for r in results:
        for k, v in r.items():
            if isinstance(v, bool) or k.startswith("max_") or isinstance(v, list):
                continue
            if isinstance(v, (int, float)):
                merged[k] = merged.get(k, 0) + v
            elif isinstance(v, dict):
                d = merged.setdefault(k, {})
                for kk, vv in v.items():
                    bump(d, kk, vv)
            else:
                merged.setdefault(k + "s", []).append(v)
    return merged


def fmt_ms(v):
    if v is None:
        return "-"
    if math.isinf(v):
        return "fail"
    return "%.2f" % v


def fmt_ratio(v, base):
    if v is None or base is None:
        return "-"
    if math.isinf(v):
        return "fail"
    return "%.1fx" % (v / base)


# ---------------------------------------------------------------- self-test (--self-test)


class _FakeApi(threading.Thread):
    """A stand-in for a daemon that refuses: every request gets `status`
    with our JSON error shape and `Connection: close` (None: closed without an
    answer). With whole_head False it answers after the first bytes, as a
    header deadline or a per-address limit would."""

    def __init__(self, status, code, whole_head=True):
        super().__init__(daemon=True)
        self.status, self.code, self.whole_head = status, code, whole_head
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]

    def run(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with c:
                c.settimeout(2)
                head = b""
                try:
                    while b"\r\n\r\n" not in head:
                        chunk = c.recv(4096)
                        head += chunk
                        if not chunk or not self.whole_head:
                            break
                    if self.status is None:
                        continue  # close without an answer: a reset for the client
                    body = json.dumps({"error": {"code": self.code, "message": "m",
                                                 "field": None}, "request_id": "r"}).encode()
                    c.sendall(b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
                              b"Connection: close\r\nContent-Length: %d\r\n\r\n%s"
                              % (self.status, len(body), body))
                except OSError:
                    pass


def self_test():
    """The accounting this bench's claims rest on, without a daemon and
    without timing: failures count as infinitely slow, and every refusal an
    attacker meets is counted, not retried silently or fatal."""
    problems = []

    def check(what, ok, got):
        if not ok:
            problems.append("%s: got %r" % (what, got))

    s = summarise([("ok", 0.001)] * 98 + [("timeout", 5.0), ("refused", 0.0001)], {})
    check("2 of 100 failed: p99 is a failure", math.isinf(s["p99_ms"]), s)
    check("2 of 100 failed: p50 answered", s["p50_ms"] == 1.0 and s["ok"] == 98, s)
    check("failures by kind", s["outcomes"] == {"ok": 98, "timeout": 1, "refused": 1}, s)
    s = summarise([("ok", 0.001)] * 100 + [("http_429", 0.0001)], {})
    check("1 of 101 refused with 429: p99 still answered", s["p99_ms"] == 1.0, s)

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    dead = closed.getsockname()[1]
    closed.close()
    r = worker_anon({"port": dead, "deadline": time.time() + 0.3})
    check("anon vs a closed port: refused, counted",
          r["requests"] > 0 and set(r["outcomes"]) == {"refused"}, r)

    api = _FakeApi(429, "limit_exceeded")
    api.start()
    r = worker_pending({"port": api.port, "deadline": time.time() + 20, "cap": 100, "conns": 2,
                        "mode": "fill", "token": "x"})
    check("fill vs 429: stops at the limit (a try or two per connection, not 20 s of them)",
          1 <= r["limited"] <= 4 and r["cap_reached_s"] is not None, r)
    check("fill vs 429: the refusal counted with its code",
          r["create_outcomes"].get("http_429:limit_exceeded", 0) >= 1
          and sum(r["create_outcomes"].values()) == r["limited"], r)
    r = worker_pending({"port": api.port, "deadline": time.time() + 0.5, "cap": 100, "conns": 1,
                        "mode": "churn", "ids": ["a-1", "a-2"], "token": "x", "limited": True})
    check("churn vs 429: releases tried, refusals counted, reconnects after close",
          r["release_outcomes"].get("http_429:limit_exceeded", 0) == 2
          and r["create_outcomes"].get("http_429:limit_exceeded", 0) > 2, r)
    r = worker_anon({"port": api.port, "deadline": time.time() + 0.3})
    check("anon vs 429 + close: reconnects, counts every answer",
          r["requests"] > 2 and set(r["outcomes"]) == {"http_429"}, r)

    mute = _FakeApi(None, None, whole_head=False)
    mute.start()
    r = worker_slow({"port": mute.port, "deadline": time.time() + 2.5, "conns": 5,
                     "sources": [ATTACKER_SRC]})
    check("slow vs a server that closes: closes counted, connections reopened",
          r["closed_by_server"] >= 5 and r["opened"] >= 10, r)
    slow408 = _FakeApi(408, "timeout", whole_head=False)
    slow408.start()
    r = worker_slow({"port": slow408.port, "deadline": time.time() + 1.5, "conns": 5,
                     "sources": [ATTACKER_SRC]})
    check("slow vs 408: answers counted by status", r["responses"].get("408", 0) >= 5, r)
    for srv in (api, mute, slow408):
        srv.sock.close()
    for pr in problems:
        print("FAIL %s" % pr)
    print("self-test: %s" % ("ok" if not problems else "%d failed" % len(problems)))
    return 1 if problems else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--label", help="free text kept in the JSON (the commit BUILD was built from)")
    ap.add_argument("--phases", default="anon,slow,pending")
    ap.add_argument("--baseline-s", type=float)
    ap.add_argument("--phase-s", type=float)
    ap.add_argument("--after-s", type=float)
    ap.add_argument("--pending-cap", type=int, default=2600)
    ap.add_argument("--pending-conns", type=int, default=4)
    ap.add_argument("--slow-conns", type=int, default=1000)
    ap.add_argument("--slow-sources", type=int, default=1)
    ap.add_argument("--anon-procs", type=int, default=4)
    ap.add_argument("--victim-timeout", type=float, default=5.0)
    ap.add_argument("--pending-fill-s", type=float)
    ap.add_argument("--attacker-max-pending", type=int,
                    help="set the attacker's limits.max_pending (a daemon without limits refuses;"
                    " that is recorded and the run goes on)")
    ap.add_argument("--self-test", action="store_true",
                    help="check the outcome accounting against fake servers (no daemon, no timing)")
    ap.add_argument("--worker", metavar="KIND", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker_main(a.worker)
    if a.self_test:
        return self_test()

    baseline_s = a.baseline_s or (4.0 if a.quick else 15.0)
    phase_s = a.phase_s or (8.0 if a.quick else 25.0)
    after_s = a.after_s if a.after_s is not None else (2.0 if a.quick else 4.0)
    fill_s = a.pending_fill_s or (12.0 if a.quick else 45.0)
    phases = [p for p in a.phases.split(",") if p]
    for p in phases:
        if p not in WORKERS:
            ap.error("--phases: unknown phase %r (anon, slow, pending, busy)" % p)
    isostackd = os.path.join(a.build, "isostackd")
    if not os.path.exists(isostackd):
        ap.error("no isostackd in %s" % a.build)
    json_path = a.json or os.path.join(a.build, "abuse-bench.json")

    import harness  # noqa: E402 - the tests' daemon runner: start, wait, admin token, cleanup
    harness.Binaries.isostackd = os.path.abspath(isostackd)
    harness.install_signal_handlers()
    head, dirty = git_head()
    # The daemon's own default limits and rates are what is measured.
    d = harness.Daemon(os.path.join(ROOT, "examples", "cluster.yaml"), test_rates=False)
    report = {"label": a.label, "commit": head, "worktree_dirty": dirty,
              "build": os.path.abspath(a.build),
              "isostackd_mtime": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                               time.gmtime(os.path.getmtime(isostackd))),
              "machine": {"cpus": os.cpu_count(), "loadavg_at_start": os.getloadavg(),
                          "platform": platform.platform(), "python": platform.python_version()},
              "params": {"baseline_s": baseline_s, "phase_s": phase_s, "after_s": after_s,
                         "pending_fill_max_s": fill_s,
                         "attacker_max_pending": a.attacker_max_pending,
                         "phases": phases, "pending_cap": a.pending_cap,
                         "pending_conns": a.pending_conns, "slow_conns": a.slow_conns,
                         "slow_sources": a.slow_sources, "anon_procs": a.anon_procs,
                         "victim_timeout_s": a.victim_timeout, "victim_src": VICTIM_SRC,
                         "attacker_src": ATTACKER_SRC, "healthz_gap_s": HEALTHZ_GAP_S,
                         "create_gap_s": CREATE_GAP_S},
              "windows": {}, "attackers": {}, "ok": False}
    t_run = time.time()
    try:
        d.start()
        port = d.port
        report["daemon_nofile"] = daemon_nofile(d.proc.pid)
        admin = d.admin_token
        tokens = {}
        for t in ("attacker", "victim"):
            o, _, _, _ = one_request(port, "POST", "/v1/tenants", {"name": t}, admin)
            if o != "ok":
                raise SystemExit("set-up: create tenant %s: %s" % (t, o))
            o, _, _, b = one_request(port, "POST", "/v1/tokens",
                                     {"role": "tenant-user", "tenant": t, "user": t + "-user"},
                                     admin)
            if o != "ok":
                raise SystemExit("set-up: token for %s: %s" % (t, o))
            tokens[t] = b["token"]
        if a.attacker_max_pending is not None:
            o, _, _, b = one_request(port, "PATCH", "/v1/tenants/attacker",
                                     {"limits": {"max_pending": a.attacker_max_pending}}, admin)
            report["attacker_limit_set"] = o if o == "ok" else "%s %s" % (o, json.dumps(b))
        # The victim probes as fast as it can (2 changes per create probe,
        # ~70 a second): more than a tenant's default rate. It measures, so
        # it gets a rate of its own; the attacker keeps the default.
        o, _, _, b = one_request(port, "PATCH", "/v1/tenants/victim",
                                 {"limits": {"writes_per_s": 100000, "reads_per_s": 100000}},
                                 admin)
        report["victim_rates_set"] = o if o == "ok" else "%s %s" % (o, json.dumps(b))
        o, _, _, b = one_request(port, "GET", "/v1/tenants/attacker", None, admin)
        report["attacker_tenant"] = b
        o, _, _, b = one_request(port, "POST", "/v1/allocations", PROBE_BODY, tokens["victim"],
                                 VICTIM_SRC)
        if o != "ok" or b.get("state") != "active":
            raise SystemExit("set-up: the victim's probe allocation is not placed: %s %r" % (o, b))
        one_request(port, "DELETE", "/v1/allocations/" + b["id"], None, tokens["victim"],
                    VICTIM_SRC)

        probes = [Probe("healthz", port, None, a.victim_timeout),
                  Probe("create", port, tokens["victim"], a.victim_timeout)]

        def window(name, seconds, attack=None):
            """Probes (and an attack) for `seconds`; returns False if the daemon died."""
            size0 = state_bytes(d.state_dir)
            lines0 = count_lines(d.logs[-1])
            procs = []
            if attack:
                kind, params, n = attack
                params["deadline"] = time.time() + seconds
                procs = start_workers(kind, params, n)
            for p in probes:
                p.set_window(name)
            t0 = time.time()
            while time.time() < t0 + seconds:  # an attack that is done early ends its window
                if procs and all(pr.poll() is not None for pr in procs):
                    break
                time.sleep(0.05)
            seconds = round(time.time() - t0, 2)
            for p in probes:
                p.set_window(None)
            res = None
            if procs:
                res = collect_workers(procs, 40.0)
                kept = [{k: v for k, v in r.items() if k != "pending_ids"} for r in res]
                report["attackers"][name] = {"kind": attack[0], "processes": len(res),
                                             "total": merge_counters(kept), "per_process": kept}
            alive = d.proc.poll() is None
            # The probes' summaries are made at the end, once every request
            # started in this window has its answer or its timeout.
            report["windows"][name] = {
                "seconds": seconds, "daemon_alive": alive,
                "state_dir_growth_bytes": state_bytes(d.state_dir) - size0,
                "daemon_stderr_lines": count_lines(d.logs[-1]) - lines0}
            print("  %-16s done%s" % (name, "" if alive else ": DAEMON DIED"), file=sys.stderr,
                  flush=True)
            return alive, res

        for p in probes:
            p.thread.start()
        alive, _ = window("baseline", baseline_s)
        for ph in phases:
            if not alive:
                break
            if ph == "anon":
                attack = ("anon", {"port": port}, a.anon_procs)
            elif ph == "slow":
                sources = ([ATTACKER_SRC] if a.slow_sources <= 1 else
                           ["127.0.1.%d" % (i + 1) for i in range(a.slow_sources)])
                attack = ("slow", {"port": port, "conns": a.slow_conns, "sources": sources}, 1)
            elif ph == "busy":
                attack = ("busy", {"port": port, "token": tokens["attacker"],
                                   "conns": a.pending_conns}, 1)
            else:
                # Fill first (its own window, bounded by --pending-fill-s), then
                # churn the full queue for --phase-s.
                params = {"port": port, "token": tokens["attacker"], "cap": a.pending_cap,
                          "conns": a.pending_conns, "mode": "fill"}
                alive, res = window("pending (fill)", fill_s, ("pending", params, 1))
                if not alive:
                    break
                filled = res[0] if res else {}
                attack = ("pending", dict(params, mode="churn",
                                          ids=filled.get("pending_ids", []),
                                          limited=filled.get("limited", 0) > 0), 1)
            alive, _ = window(ph, phase_s, attack)
            if alive:
                alive, _ = window(ph + " (after)", after_s)
        for p in probes:
            p.stop.set()
        for p in probes:
            p.thread.join(timeout=a.victim_timeout * 3 + 5)
        for name, w in report["windows"].items():
            for p in probes:
                w[p.name] = summarise(p.samples.get(name, []), p.extra.get(name, {}))
        report["victim_unreleased"] = len(probes[1].leftover)
        report["daemon_alive_at_end"] = d.proc.poll() is None
        report["ok"] = alive and all(n in report["windows"] for n in phases)
    finally:
        report["run_s"] = round(time.time() - t_run, 1)
        if d.proc is not None and d.proc.poll() is not None:
            report["daemon_exit"] = d.proc.returncode
            report["daemon_stderr_tail"] = d.stderr_tail(30)
        elif d.proc is not None:
            # A clean stop (SIGTERM, exit 0), so that an ASan+UBSan build's
            # reports, leaks included, are read before the logs go.
            try:
                d.stop()
            except harness.DaemonError as e:
                report["ok"] = False
                report["daemon_stop_problem"] = str(e)[:4000]
        reports = harness.sanitizer_reports()
        if reports:
            report["ok"] = False
            report["sanitizer_reports"] = [r[:4000] for r in reports]
        d.cleanup()
        with open(json_path, "w") as f:
            json.dump(report, f, indent=1, default=str)
            f.write("\n")

    print_table(report)
    for k in ("daemon_stop_problem", "sanitizer_reports", "daemon_stderr_tail"):
        if k in report:
            print("%s:\n%s" % (k, report[k] if isinstance(report[k], str) else
                                "\n".join(report[k])))
    print("JSON: %s" % json_path)
    return 0 if report["ok"] else 1


def print_table(rep):
    m = rep["machine"]
    print("isostackd abuse bench: %sHEAD %s%s at run time, %d CPUs, %.0f s" % (
        rep["label"] + ", " if rep["label"] else "", (rep["commit"] or "?")[:12],
        " (dirty tree)" if rep["worktree_dirty"] else "", m["cpus"], rep["run_s"]))
    print("victim probes from %s on fresh connections; p99 'fail' = over 1%% of requests got "
          "no 2xx answer within %.0f s; ratio = p99 / baseline p99 (goal <= 2x)"
          % (VICTIM_SRC, rep["params"]["victim_timeout_s"]))
    hdr = "%-18s %11s %11s %7s %9s | %11s %11s %7s %9s | %s" % (
        "window", "healthz p50", "p99 ms", "ratio", "ok/n", "create p50", "p99 ms", "ratio",
        "ok/n", "attacker")
    print(hdr)
    print("-" * len(hdr))
    base = rep["windows"].get("baseline")
    for name, w in rep["windows"].items():
        cells = []
        for probe in ("healthz", "create"):
            s = w[probe]
            b = base[probe]["p99_ms"] if base else None
            cells.append("%11s %11s %7s %9s" % (fmt_ms(s["p50_ms"]), fmt_ms(s["p99_ms"]),
                                                fmt_ratio(s["p99_ms"], b),
                                                "%d/%d" % (s["ok"], s["n"])))
        print("%-18s %s | %s | %s" % (name, cells[0], cells[1], attacker_summary(rep, name)))


def attacker_summary(rep, name):
    at = rep["attackers"].get(name)
    if not at:
        return ""
    t = at["total"]
    if at["kind"] == "anon":
        return "%d req, %s" % (t.get("requests", 0), top(t.get("outcomes", {})))
    if at["kind"] == "busy":
        return "%d created and released, creates %s" % (t.get("released", 0),
                                                         top(t.get("create_outcomes", {})))
    if at["kind"] == "slow":
        return "max open %d, opened %d, closed by server %d, connect failed %s" % (
            max([p.get("max_open", 0) for p in at["per_process"]] or [0]), t.get("opened", 0),
            t.get("closed_by_server", 0), sum(t.get("connect_failed", {}).values()))
    if t.get("mode") == "churn":
        return "pending %d -> %d, released %d, creates %s" % (
            t.get("pending_start", 0), t.get("pending_end", 0), t.get("released", 0),
            top(t.get("create_outcomes", {})))
    reached = t.get("cap_reached_s")
    return "max pending %d%s, creates %s" % (
        t.get("max_pending", 0), "" if reached is None else " (cap/limit at %.1f s)" % reached,
        top(t.get("create_outcomes", {})))


def top(d):
    return ", ".join("%s %d" % kv for kv in sorted(d.items(), key=lambda kv: -kv[1])[:3])


if __name__ == "__main__":
    sys.exit(main())
