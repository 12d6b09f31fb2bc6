"""harness.py: what every API test needs and nothing more: start a real
isostackd on a free port with its own temporary state dir, wait until it
serves /v1/healthz, read its bootstrap admin token, talk HTTP to it, stop it
(SIGTERM, then SIGKILL) and clean up, whatever happens. It also turns
sanitizer reports in the daemon's stderr into test failures, so the same tests
are meaningful against an ASan+UBSan build.

Python 3 standard library only. Every test file is run as
    python3 tests/api/test_X.py PATH/TO/isostackd PATH/TO/isoctl
with ISO_SOURCE_ROOT set to the repository root; exit 0 pass, 1 fail, 77 skip.

Environment knobs (all optional):
    ISO_TEST_TIMEOUT_SCALE  multiply every timeout (default 1, or 4 when the
                            daemon binary is built with a sanitizer)
    ISO_TEST_KEEP=1         keep temporary dirs (daemon logs) for debugging
"""

import atexit
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

SKIP_EXIT = 77

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_ROOT = os.environ.get("ISO_SOURCE_ROOT") or os.path.dirname(os.path.dirname(HERE))
DATA_DIR = os.path.join(HERE, "data")

# Markers of a sanitizer report in the daemon's stderr: any of them fails the test.
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer")

RFC3339_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
TOKEN_RE = re.compile(r"^iso_([0-9a-f]{12})_[A-Za-z0-9_-]{43}$")
REQUEST_ID_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
TERMINAL_STATES = ("released", "failed")
LIVE_STATES = ("pending", "placed", "provisioning", "active", "releasing")
HOLDING_STATES = ("placed", "provisioning", "active", "releasing")

# ---------------------------------------------------------------- binaries


class Binaries:
    isostackd = None
    isoctl = None


def _parse_argv():
    """argv[1] = isostackd, argv[2] = isoctl (or ISOSTACKD / ISOCTL in the
    environment); anything after them goes to unittest (test names, -k, -v)."""
    args = sys.argv[1:]
    bins = []
    while args and len(bins) < 2 and not args[0].startswith("-") and os.path.sep in args[0]:
        bins.append(args.pop(0))
    Binaries.isostackd = os.path.abspath(bins[0]) if len(bins) > 0 else os.environ.get("ISOSTACKD")
    Binaries.isoctl = os.path.abspath(bins[1]) if len(bins) > 1 else os.environ.get("ISOCTL")
    sys.argv[1:] = args


_sanitized_cache = {}


def is_sanitized(binary):
    """True when the binary carries ASan/UBSan runtime symbols."""
    if binary not in _sanitized_cache:
        found = False
        try:
            with open(binary, "rb") as f:
                data = f.read()
            found = b"__asan_init" in data or b"__ubsan_handle" in data
        except OSError:
            pass
        _sanitized_cache[binary] = found
    return _sanitized_cache[binary]


def timeout_scale():
    env = os.environ.get("ISO_TEST_TIMEOUT_SCALE")
    if env:
        try:
            return max(1.0, float(env))
        except ValueError:
            pass
    if Binaries.isostackd and is_sanitized(Binaries.isostackd):
        return 4.0
    return 1.0


def T(seconds):
    """A timeout, scaled for slow (sanitized) builds."""
    return seconds * timeout_scale()


# ---- real sandboxes: root, cgroups and the tools a test names ----

CGROUP_ROOT = "/sys/fs/cgroup"


def sandbox_skip_reason(*tools):
    """Why a test of real sandboxes cannot run here, or None: it needs root,
    cgroup controllers (v1 hierarchies or a v2 tree) and each of `tools`."""
    if os.geteuid() != 0:
        return "not root: sandboxes need root"
    if not (os.path.isdir(os.path.join(CGROUP_ROOT, "cpuset"))
            or os.path.exists(os.path.join(CGROUP_ROOT, "cgroup.controllers"))):
        return "no cgroup controllers under " + CGROUP_ROOT
    for tool in tools:
        if not shutil.which(tool):
            return "no %s on PATH" % tool
    return None


# ---- a throwaway PostgreSQL (scripts/pg-test-cluster.sh) for --store tests ----

PG_SCRIPT = os.path.join(SOURCE_ROOT, "scripts", "pg-test-cluster.sh")
PG_BIN = os.environ.get("PG_BIN", "/usr/lib/postgresql/15/bin")
# A class decorator: such tests skip, saying why, only where the server
# binaries are missing (CI installs them: scripts/deps.sh).
needs_postgres = unittest.skipUnless(
    os.access(os.path.join(PG_BIN, "initdb"), os.X_OK),
    "no PostgreSQL server binaries in %s (apt-get install postgresql-15)" % PG_BIN)


def psql(conninfo, sql):
    """Runs one statement; its output, or AssertionError with psql's."""
    out = subprocess.run(["psql", conninfo, "-XtAq", "-c", sql], capture_output=True,
                         text=True, timeout=T(30))
    if out.returncode != 0:
        raise AssertionError("psql %r: %s" % (sql, out.stderr))
    return out.stdout.strip()


class PgCluster:
    """A PostgreSQL cluster in a temp dir, started at construction; each
    fresh_db() is a new empty database on it, so tests do not share state."""

    def __init__(self, prefix):
        self.dir = tempfile.mkdtemp(prefix=prefix)
        out = subprocess.run([PG_SCRIPT, "start", self.dir], capture_output=True, text=True,
                             timeout=T(60))
        if out.returncode != 0:
            shutil.rmtree(self.dir, ignore_errors=True)
            raise AssertionError("pg-test-cluster.sh start: %s" % out.stderr)
        self.base = out.stdout.strip().splitlines()[-1]  # its last line: the conninfo
        self.n = 0

    def fresh_db(self, stem="iso"):
        self.n += 1
        name = "%s_%d" % (stem, self.n)
        psql(self.base, "CREATE DATABASE %s" % name)
        return self.base.replace("dbname=postgres", "dbname=" + name)

    def stop(self):
        subprocess.run([PG_SCRIPT, "stop", self.dir], capture_output=True, timeout=T(60))
        if not os.environ.get("ISO_TEST_KEEP"):  # keep the logs for a look
            shutil.rmtree(self.dir, ignore_errors=True)


def data_path(name):
    return os.path.join(DATA_DIR, name)


# ---------------------------------------------------------------- network


def free_port():
    """A port nobody listens on right now (bind 0, read, close). Another
    process may take it before the daemon does: Daemon.start retries."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def port_accepts(port, timeout=0.5):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout):
            return True
    except OSError:
        return False


class Response:
    """One HTTP answer. Unpacks as (status, headers, body): body is the parsed
    JSON when the payload is JSON, else the raw bytes (b"" when empty)."""

    def __init__(self, method, path, status, headers, raw):
        self.method = method
        self.path = path
        self.status = status
        self.headers = headers  # http.client.HTTPMessage: case-insensitive .get()
        self.raw = raw
        self.is_json = False
        self.body = raw
        if raw:
            try:
                self.body = json.loads(raw.decode("utf-8"))
                self.is_json = True
            except (UnicodeDecodeError, ValueError):
                pass

    def __iter__(self):
        return iter((self.status, self.headers, self.body))

    @property
    def text(self):
        return self.raw.decode("utf-8", "replace")

    def header(self, name):
        return self.headers.get(name)

    def __repr__(self):
        t = self.text
        if len(t) > 600:
            t = t[:600] + "..."
        return "%s %s -> %d %s" % (self.method, self.path, self.status, t)


def http_request(port, method, path, body=None, token=None, headers=None, raw=None,
                 timeout=None):
    """One request on a fresh connection. `body` is JSON-encoded; `raw` is sent
    as is (bytes or str). `token` adds Authorization: Bearer."""
    hdrs = {}
    data = None
    if raw is not None:
        data = raw.encode("utf-8") if isinstance(raw, str) else raw
        hdrs["Content-Type"] = "application/json"
    elif body is not None:
        data = json.dumps(body).encode("utf-8")
        hdrs["Content-Type"] = "application/json"
    if token is not None:
        hdrs["Authorization"] = "Bearer " + token
    if headers:
        hdrs.update(headers)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout or T(30))
    try:
        conn.request(method, path, body=data, headers=hdrs)
        r = conn.getresponse()
        payload = r.read()
        return Response(method, path, r.status, r.headers, payload)
    finally:
        conn.close()


class Client:
    """HTTP helper bound to one daemon and one token."""

    def __init__(self, daemon, token=None):
        self.daemon = daemon
        self.token = token

    def request(self, method, path, body=None, **kw):
        kw.setdefault("token", self.token)
        return self.daemon.request(method, path, body=body, **kw)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, body, **kw)

    def patch(self, path, body=None, **kw):
        return self.request("PATCH", path, body, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def with_token(self, token):
        return Client(self.daemon, token)

    def list_all(self, path, limit=100, max_pages=10000):
        """Follows `next` to the end; returns every item. Fails on a bad page."""
        items = []
        after = None
        seen_cursors = set()
        for _ in range(max_pages):
            sep = "&" if "?" in path else "?"
            q = "%s%slimit=%d" % (path, sep, limit)
            if after is not None:
                q += "&after=" + _quote(after)
            r = self.get(q)
            if r.status != 200 or not isinstance(r.body, dict) or "items" not in r.body:
                raise AssertionError("list %s failed: %r" % (q, r))
            page = r.body["items"]
            if len(page) > limit:
                raise AssertionError("list %s: %d items on a page of limit %d" % (q, len(page), limit))
            items.extend(page)
            after = r.body.get("next")
            if after is None:
                return items
            if after in seen_cursors:
                raise AssertionError("list %s: cursor %r repeats" % (q, after))
            seen_cursors.add(after)
        raise AssertionError("list %s: more than %d pages" % (path, max_pages))


def _quote(s):
    from urllib.parse import quote
    return quote(str(s), safe="")


def token_id(token):
    m = TOKEN_RE.match(token or "")
    return m.group(1) if m else None


# ---------------------------------------------------------------- daemon

_all_daemons = []
_registry_lock = threading.Lock()


class DaemonError(AssertionError):
    """The daemon failed to start, stop, or reported a sanitizer error."""


class Daemon:
    """One isostackd process (and its restarts on the same state dir).

    Owns a temporary directory holding the state dir (unless one is given)
    and one stderr/stdout log per start. Always call cleanup() (or use it as a
    context manager); an atexit hook kills anything left over."""

    def __init__(self, config, binary=None, state_dir=None, extra_args=(), env=None,
                 test_rates=True, agents=False, fixed_port=False):
        self.binary = binary or Binaries.isostackd
        # fixed_port: one port for every start (node agents hold the
        # controller's URL across its restarts); else a free one each start
        self.fixed_port = free_port() if fixed_port else None
        if not self.binary:
            raise DaemonError("no isostackd binary: pass it as argv[1]")
        self.config = config if os.path.isabs(config) else data_path(config)
        self.tmp = tempfile.mkdtemp(prefix="isoapi-")
        self.state_dir = state_dir or os.path.join(self.tmp, "state")
        os.makedirs(self.state_dir, mode=0o700, exist_ok=True)
        self.extra_args = list(extra_args)
        # Tests drive one tenant far faster than the daemon's default rates
        # allow a tenant (docs/tenancy.md, "Request rates"); tests of the rates
        # themselves give their own flags, which win, and benchmarks that
        # measure the defaults pass test_rates=False.
        for flag in ("--tenant-writes-per-s", "--tenant-reads-per-s"):
            if test_rates and flag not in self.extra_args:
                self.extra_args += [flag, "100000"]
        # Tests run no node agents, so allocations go active without waiting
        # for one (docs/agents.md, "Provisioning gate"); tests of the gate and
        # of the agent pass agents=True.
        if not agents and "--no-agents" not in self.extra_args:
            self.extra_args.append("--no-agents")
        self.env = dict(os.environ)
        self.env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
        if env:
            self.env.update(env)
        self.proc = None
        self.port = None
        self.starts = 0
        self.logs = []  # stderr log of every start, in order
        self.admin_token = None
        self.last_returncode = None
        self._reported = set()  # logs whose sanitizer report already failed a test
        with _registry_lock:
            _all_daemons.append(self)

    # -- lifecycle

    def command(self, port):
        return [self.binary, "--config", self.config, "--state-dir", self.state_dir,
                "--listen", "127.0.0.1:%d" % port] + self.extra_args

    def start(self, timeout=None):
        """Starts and waits for healthz; reads admin.token. Returns self."""
        if self.proc is not None and self.proc.poll() is None:
            raise DaemonError("daemon already running")
        timeout = timeout or T(20)
        last_err = None
        for _attempt in range(4):
            port = self.fixed_port or free_port()
            self.starts += 1
            log = os.path.join(self.tmp, "isostackd.%d.stderr" % self.starts)
            out = os.path.join(self.tmp, "isostackd.%d.stdout" % self.starts)
            self.logs.append(log)
            with open(log, "wb") as ferr, open(out, "wb") as fout:
                self.proc = subprocess.Popen(self.command(port), stdin=subprocess.DEVNULL,
                                             stdout=fout, stderr=ferr, env=self.env,
                                             start_new_session=True)
            self.port = port
            ok, why = self._wait_ready(timeout)
            if ok:
                self._read_admin_token()
                # A parallel test may have taken the port first, and the healthz
                # that answered be its daemon: ours then exits, and its token fails.
                time.sleep(0.05)
                if self.proc.poll() is None:
                    r = http_request(self.port, "GET", "/v1/whoami", token=self.admin_token)
                    if r.status != 401:
                        self.check_sanitizers()
                        return self
                    why = "admin.token refused on port %d (another daemon there?)" % port
                else:
                    why = "exited right after healthz with status %d" % self.proc.returncode
                if self.proc.poll() is not None or "another daemon" in why:
                    self.kill()
                    last_err = why
                    continue
            tail = self.stderr_tail()
            if self.proc.poll() is not None and re.search(r"(?i)address already in use|EADDRINUSE",
                                                          tail):
                last_err = why
                continue  # lost the port race with another test: try a new port
            self.kill()
            raise DaemonError("isostackd did not become ready: %s\ncommand: %s\n--- stderr tail ---\n%s"
                              % (why, " ".join(self.command(port)), tail))
        raise DaemonError("isostackd could not bind a port: %s\n%s" % (last_err, self.stderr_tail()))

    def _wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            rc = self.proc.poll()
            if rc is not None:
                self.last_returncode = rc
                return False, "exited early with status %d" % rc
            try:
                r = http_request(self.port, "GET", "/v1/healthz", timeout=T(2))
                if r.status == 200:
                    if not isinstance(r.body, dict) or r.body.get("status") != "ok":
                        return False, "healthz answered 200 with %r" % (r.raw[:200],)
                    # On PostgreSQL a restart after kill -9 follows until the
                    # dead process's lease runs out (docs/store.md, "High
                    # availability"): ready once it leads.
                    if r.body.get("role", "leader") == "leader":
                        return True, ""
                    last = "healthz: %s" % r.body.get("role")
                else:
                    last = "healthz answered %d" % r.status
            except (OSError, http.client.HTTPException) as e:
                last = "%s: %s" % (type(e).__name__, e)
            time.sleep(0.05)
        return False, "no healthy answer within %.0fs (last: %s)" % (timeout, last)

    def _read_admin_token(self):
        path = os.path.join(self.state_dir, "admin.token")
        deadline = time.monotonic() + T(5)
        while True:
            try:
                with open(path) as f:
                    tok = f.read().strip()
                if tok:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise DaemonError("%s missing or empty after start" % path)
            time.sleep(0.05)
        mode = os.stat(path).st_mode & 0o777
        if mode != 0o600:
            raise DaemonError("%s has mode %o, want 600" % (path, mode))
        if not TOKEN_RE.match(tok):
            raise DaemonError("admin.token %r does not look like iso_<12 hex>_<43 chars>" % tok)
        self.admin_token = tok

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, expect_clean=True):
        """SIGTERM, wait; SIGKILL when it hangs. Fails when it did not exit
        with status 0 on SIGTERM (if expect_clean) or a sanitizer spoke."""
        if self.proc is None:
            return None
        problems = []
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=T(15))
            except subprocess.TimeoutExpired:
                problems.append("did not exit within %.0fs of SIGTERM; killed" % T(15))
                self._killpg()
                self.proc.wait()
        rc = self.proc.returncode
        self.last_returncode = rc
        self.proc = None
        if expect_clean and rc != 0 and not problems:
            problems.append("exited with status %s after SIGTERM (want 0)" % rc)
        self.check_sanitizers()
        if problems:
            raise DaemonError("isostackd: %s\n--- stderr tail ---\n%s"
                              % ("; ".join(problems), self.stderr_tail()))
        return rc

    def _killpg(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                self.proc.kill()
            except ProcessLookupError:
                pass

    def kill(self):
        """SIGKILL (a crash). No cleanliness expected."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self._killpg()
        self.proc.wait()
        self.last_returncode = self.proc.returncode
        self.proc = None
        return self.last_returncode

    def restart(self, timeout=None):
        """Clean stop and start on the same state dir (new port)."""
        self.stop()
        return self.start(timeout)

    def cleanup(self):
        try:
            if self.proc is not None:
                self.kill()
        finally:
            if os.environ.get("ISO_TEST_KEEP"):
                sys.stderr.write("harness: kept %s\n" % self.tmp)
            else:
                shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        try:
            if exc[0] is None:
                self.stop()
        finally:
            self.cleanup()
        return False

    # -- logs

    def stderr_text(self, which=None):
        paths = self.logs if which is None else [self.logs[which]]
        parts = []
        for p in paths:
            try:
                with open(p, "rb") as f:
                    parts.append(f.read().decode("utf-8", "replace"))
            except OSError:
                pass
        return "".join(parts)

    def stderr_tail(self, n=60):
        text = self.stderr_text(-1) if self.logs else ""
        return "\n".join(text.splitlines()[-n:])

    def check_sanitizers(self):
        """Fails on a sanitizer report in a log not reported before (each
        report fails one test, not every later one)."""
        for i, path in enumerate(self.logs):
            if path in self._reported:
                continue
            text = self.stderr_text(i)
            for m in SANITIZER_MARKERS:
                k = text.find(m)
                if k >= 0:
                    self._reported.add(path)
                    lo = text.rfind("\n", 0, max(0, k - 2000))
                    raise DaemonError("sanitizer report in isostackd stderr (%r, start %d):\n%s"
                                      % (m, i + 1, text[lo + 1:k + 4000]))

    # -- clients

    def client(self, token="admin"):
        """A Client; token "admin" (default) means the bootstrap admin token."""
        if token == "admin":
            token = self.admin_token
        return Client(self, token)

    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def request(self, method, path, body=None, **kw):
        """http_request to this daemon; a transport error from a daemon that
        has died becomes a DaemonError with its exit status and stderr."""
        try:
            return http_request(self.port, method, path, body=body, **kw)
        except (OSError, http.client.HTTPException) as e:
            if self.proc is not None:
                try:
                    self.proc.wait(timeout=0.5)  # a crashing daemon may still be exiting
                except subprocess.TimeoutExpired:
                    pass
            if self.proc is not None and self.proc.poll() is not None:
                raise DaemonError("isostackd died (exit status %s) during or before %s %s: %r\n"
                                  "--- stderr tail ---\n%s"
                                  % (self.proc.returncode, method, path, e, self.stderr_tail()))
            raise


def _cleanup_all():
    with _registry_lock:
        ds = list(_all_daemons)
    for d in ds:
        try:
            d.cleanup()
        except Exception:  # noqa: BLE001 - last-ditch cleanup
            pass


atexit.register(_cleanup_all)


def _on_signal(signum, frame):
    _cleanup_all()
    os._exit(128 + signum)


def install_signal_handlers():
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        try:
            signal.signal(s, _on_signal)
        except (ValueError, OSError):
            pass


def sanitizer_reports():
    """Reports left in the log of any daemon this process started."""
    out = []
    with _registry_lock:
        ds = list(_all_daemons)
    for d in ds:
        try:
            d.check_sanitizers()
        except DaemonError as e:
            out.append(str(e))
    return out


# ---------------------------------------------------------------- assertions


class ApiTestCase(unittest.TestCase):
    """Assertions on statuses, error bodies and object shapes."""

    maxDiff = 4000
    wait_timeout = 20  # seconds (scaled by T) that wait_until gives a condition

    def wait_context(self):
        """What a timed-out wait_until prints beside its message (a test
        that runs an agent gives the agent's log)."""
        return ""

    def wait_until(self, what, pred, timeout=None):
        """Polls pred() every 0.1 s until it is truthy and returns its value;
        fails naming `what` after the timeout."""
        deadline = time.time() + T(timeout or self.wait_timeout)
        while time.time() < deadline:
            v = pred()
            if v:
                return v
            time.sleep(0.1)
        self.fail("timed out waiting until %s%s" % (what, self.wait_context()))

    def assertStatus(self, r, status, msg=None):
        if r.status != status:
            self.fail("%sexpected %d, got %r" % (msg + ": " if msg else "", status, r))

    def assertError(self, r, status, code, field=Ellipsis, msg=None):
        """Error status, exact error shape, code, and `field` (when given:
        a string must match exactly; a callable must accept it)."""
        self.assertStatus(r, status, msg)
        check_error_shape(self, r)
        err = r.body["error"]
        self.assertEqual(err["code"], code, "%r" % r)
        if field is not Ellipsis:
            if callable(field):
                self.assertTrue(field(err["field"]), "field %r rejected: %r" % (err["field"], r))
            else:
                self.assertEqual(err["field"], field, "%r" % r)
        return err

    def assertTime(self, v, what="time"):
        self.assertIsInstance(v, str, what)
        self.assertRegex(v, RFC3339_MS, what)


class SharedDaemonCase(ApiTestCase):
    """One daemon for the whole class (tests use fresh names so they do not
    meet): `config`, `daemon_args` and `daemon_env` say how it starts, and
    `set_up_world` (a classmethod) adds what every test of the class needs.
    A failure while starting or setting up still cleans the daemon up."""

    config = "small.yaml"
    daemon_args = ()
    daemon_env = None

    @classmethod
    def set_up_world(cls):
        pass

    @classmethod
    def setUpClass(cls):
        cls.d = Daemon(cls.config, extra_args=cls.daemon_args, env=cls.daemon_env)
        try:
            cls.d.start()
            cls.admin = cls.d.client()
            cls.set_up_world()
        except BaseException:
            cls.d.cleanup()
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            if cls.d.alive():
                cls.d.stop()
        finally:
            cls.d.cleanup()


class FreshDaemonCase(ApiTestCase):
    """A new daemon (empty state) for every test: `config`, `daemon_args`
    and `agents` say how it starts. A failed start still cleans it up."""

    config = "small.yaml"
    daemon_args = ()
    agents = False

    def setUp(self):
        self.d = Daemon(self.config, extra_args=self.daemon_args, agents=self.agents)
        try:
            self.d.start()
        except BaseException:
            self.d.cleanup()
            raise
        self.admin = self.d.client()

    def tearDown(self):
        try:
            self.d.stop()
        finally:
            self.d.cleanup()

    def desired(self, node):
        """GET /v1/nodes/NODE/desired as the admin: the node's desired document."""
        r = self.admin.get("/v1/nodes/%s/desired" % node)
        self.assertStatus(r, 200, "desired state of %s" % node)
        return r.body


def check_error_shape(tc, r):
    tc.assertTrue(r.is_json, "error body is not JSON: %r" % r)
    b = r.body
    tc.assertIsInstance(b, dict, "%r" % r)
    tc.assertEqual(set(b.keys()), {"error", "request_id"}, "error body keys: %r" % r)
    tc.assertIsInstance(b["error"], dict, "%r" % r)
    tc.assertEqual(set(b["error"].keys()), {"code", "message", "field"}, "error keys: %r" % r)
    tc.assertIsInstance(b["error"]["code"], str)
    tc.assertIsInstance(b["error"]["message"], str)
    tc.assertTrue(b["error"]["message"], "empty message: %r" % r)
    tc.assertTrue(b["error"]["field"] is None or isinstance(b["error"]["field"], str), "%r" % r)
    tc.assertIsInstance(b["request_id"], str)
    tc.assertRegex(b["request_id"], REQUEST_ID_RE)
    tc.assertEqual(r.header("X-Request-Id"), b["request_id"], "request id header vs body: %r" % r)
    ctype = r.header("Content-Type") or ""
    tc.assertTrue(ctype.startswith("application/json"), "Content-Type %r: %r" % (ctype, r))


# ---------------------------------------------------------------- objects

TENANT_KEYS = {"name", "description", "pkey", "created", "updated", "org", "shares", "isolation",
               "tags", "limits", "io_uring", "partition"}
TOKEN_KEYS = {"id", "role", "tenant", "user", "description", "created", "expires", "revoked"}
NODE_KEYS = {"name", "pool", "rack", "pdu", "cpus", "memory_mib", "cpus_used", "memory_mib_used",
             "state", "gpus", "gpu_model", "members", "port", "agent", "conditions"}
# What an allocation's member shows before any node agent reported it (docs/agents.md).
NO_AGENT_REPORT = {"ready": None, "devices": [], "cuda_visible_devices": None, "vf": None}


def tenant_view(a):
    """An allocation as its tenant reads it: a cluster role's answer less
    each member's `sandbox`, which only cluster roles see (docs/api.md)."""
    a = dict(a, nodes=[{k: v for k, v in m.items() if k != "sandbox"} for m in a["nodes"]])
    return a
PORT_KEYS = {"device", "port", "guid", "pkey_capacity", "vfs"}
GPU_KEYS = {"node", "index", "model", "mig_enabled", "whole_used", "free_slices", "memory_slices",
            "compute_used", "compute_slices", "free_mask", "instances", "fault"}
INSTANCE_KEYS = {"allocation", "profile", "start", "width", "whole"}
CAPACITY_KEYS = {"nodes", "schedulable_nodes", "gpus", "gpus_free", "memory_slices",
                 "memory_slices_free", "compute_slices", "compute_slices_free", "cpus", "cpus_free",
                 "memory_mib", "memory_mib_free"}
ALLOC_KEYS = {"id", "tenant", "name", "state", "reason", "members", "gpus", "cpus", "memory_mib",
              "pool", "owner", "created", "updated", "nodes", "placement",
              "project", "priority", "isolation", "spread", "on_preempt", "duration_s",
              "idempotency_key", "pkey"}
ALLOC_GPUS_KEYS = {"count", "whole", "profile", "model"}
PLACEMENT_KEYS = {"member", "node", "gpu", "whole", "profile", "start", "width"}
VERSION_KEYS = {"version", "api", "store", "placement", "fabric", "commits"}
WHOAMI_KEYS = {"token_id", "role", "tenant", "user"}

# H100-80GB MIG profiles (docs/reference-mig.md): name -> (compute, width, starts).
H100_PROFILES = {
    "1g.10gb": (1, 1, (0, 1, 2, 3, 4, 5, 6)),
    "1g.10gb+me": (1, 1, (0, 1, 2, 3, 4, 5, 6)),
    "1g.20gb": (1, 2, (0, 2, 4, 6)),
    "2g.20gb": (2, 2, (0, 2, 4)),
    "3g.40gb": (3, 4, (0, 4)),
    "4g.40gb": (4, 4, (0,)),
    "7g.80gb": (7, 8, (0,)),
}

_uniq_counter = [0]
_uniq_lock = threading.Lock()


def uniq(prefix):
    """A fresh lowercase name, valid as a tenant name."""
    with _uniq_lock:
        _uniq_counter[0] += 1
        n = _uniq_counter[0]
    return "%s-%d-%s" % (prefix, n, os.urandom(2).hex())


def sh(*argv, check=True):
    """A command (ip, nft, ...) run for a test; its stderr in the failure."""
    r = subprocess.run(argv, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise AssertionError("%s: %s" % (" ".join(argv), r.stderr.strip()))
    return r


def create_tenant(tc, client, name=None, description=None):
    name = name or uniq("t")
    body = {"name": name}
    if description is not None:
        body["description"] = description
    r = client.post("/v1/tenants", body)
    tc.assertStatus(r, 201, "create tenant %s" % name)
    return r.body


def issue_token(tc, client, role, tenant=None, user=None, description=None, expires_in_s=None):
    """Issues a token; returns (token object with secret, secret)."""
    body = {"role": role}
    if tenant is not None:
        body["tenant"] = tenant
    if user is not None:
        body["user"] = user
    if description is not None:
        body["description"] = description
    if expires_in_s is not None:
        body["expires_in_s"] = expires_in_s
    r = client.post("/v1/tokens", body)
    tc.assertStatus(r, 201, "issue %s token" % role)
    tc.assertIn("token", r.body, "%r" % r)
    return r.body, r.body["token"]


def create_alloc(tc, client, body, status=201):
    r = client.post("/v1/allocations", body)
    tc.assertStatus(r, status, "create allocation %s" % json.dumps(body))
    if status == 201:
        check_allocation(tc, r.body)
    return r.body


def check_allocation(tc, a, memory_slices=8):
    """Shape and internal consistency of one allocation object."""
    tc.assertIsInstance(a, dict, repr(a))
    tc.assertEqual(set(a.keys()), ALLOC_KEYS, "allocation keys: %r" % (a,))
    tc.assertIsInstance(a["id"], str)
    tc.assertTrue(a["id"], "empty id")
    tc.assertIn(a["state"], LIVE_STATES + TERMINAL_STATES, repr(a))
    tc.assertIsInstance(a["members"], int)
    tc.assertRegex(a["created"], RFC3339_MS)
    tc.assertRegex(a["updated"], RFC3339_MS)
    tc.assertGreaterEqual(a["updated"], a["created"])
    tc.assertIsInstance(a["owner"], str)
    tc.assertTrue(a["owner"], "empty owner: %r" % (a,))
    tc.assertIsInstance(a["nodes"], list)
    tc.assertIsInstance(a["placement"], list)
    g = a["gpus"]
    if g is not None:
        tc.assertEqual(set(g.keys()), ALLOC_GPUS_KEYS, "allocation gpus keys: %r" % (a,))
    for p in a["placement"]:
        tc.assertEqual(set(p.keys()), PLACEMENT_KEYS, "placement keys: %r" % (a,))
    if a["state"] in HOLDING_STATES:
        tc.assertEqual(len(a["nodes"]), a["members"], "holding allocation without a node per member: %r" % (a,))
        tc.assertEqual([m["member"] for m in a["nodes"]], list(range(a["members"])), repr(a))
        node_of = {m["member"]: m["node"] for m in a["nodes"]}
        want_slots = a["members"] * g["count"] if g else 0
        tc.assertEqual(len(a["placement"]), want_slots, "placement entries vs members x count: %r" % (a,))
        seen = set()
        for p in a["placement"]:
            tc.assertIn(p["member"], node_of, repr(a))
            tc.assertEqual(p["node"], node_of[p["member"]], "slot off its member's node: %r" % (a,))
            tc.assertEqual(p["whole"], bool(g["whole"]), repr(a))
            if g["whole"]:
                tc.assertEqual((p["start"], p["width"]), (0, memory_slices), repr(p))
                tc.assertIsNone(p["profile"], repr(p))
            else:
                tc.assertEqual(p["profile"], g["profile"], repr(p))
                prof = H100_PROFILES.get(g["profile"])
                if prof:
                    tc.assertEqual(p["width"], prof[1], repr(p))
                    tc.assertIn(p["start"], prof[2], repr(p))
            key = (p["node"], p["gpu"], p["start"])
            tc.assertNotIn(key, seen, "two slots at one place: %r" % (a,))
            seen.add(key)
        if g and g["whole"]:
            gpus = [(p["node"], p["gpu"]) for p in a["placement"]]
            tc.assertEqual(len(gpus), len(set(gpus)), "whole GPU used twice: %r" % (a,))
    elif a["state"] == "pending":
        tc.assertEqual(a["nodes"], [], "pending allocation with nodes: %r" % (a,))
        tc.assertEqual(a["placement"], [], "pending allocation with placement: %r" % (a,))


def slots_of(a):
    """(node, gpu, start, width) of each slot."""
    return sorted((p["node"], p["gpu"], p["start"], p["width"]) for p in a["placement"])


def check_gpu_view(tc, gpus, allocations, memory_slices=8, compute_slices=7):
    """/v1/gpus against the live allocations: no slice held twice, every slot
    of every holding allocation shown where it is, nothing else shown, and the
    counters match the instances."""
    by_id = {a["id"]: a for a in allocations}
    shown = set()
    for g in gpus:
        tc.assertEqual(set(g.keys()), GPU_KEYS, "gpu keys: %r" % (g,))
        if g["fault"] is not None:
            # Out of service (docs/tenancy.md): nothing on it, nothing free.
            tc.assertEqual(g["instances"], [], "instances on a faulted GPU: %r" % (g,))
            tc.assertEqual((g["free_slices"], g["whole_used"]), (0, False), repr(g))
            continue
        used = 0
        compute = 0
        whole = False
        for inst in g["instances"]:
            tc.assertEqual(set(inst.keys()), INSTANCE_KEYS, "instance keys: %r" % (g,))
            span = ((1 << inst["width"]) - 1) << inst["start"]
            tc.assertEqual(used & span, 0, "two instances share a slice: %r" % (g,))
            used |= span
            if inst["whole"]:
                whole = True
                compute += g["compute_slices"]
            else:
                compute += H100_PROFILES.get(inst["profile"], (0, 0, ()))[0]
            a = by_id.get(inst["allocation"])
            tc.assertIsNotNone(a, "GPU %s/%d shows allocation %s that is not live"
                               % (g["node"], g["index"], inst["allocation"]))
            tc.assertIn(a["state"], HOLDING_STATES, "GPU shows a %s allocation: %r" % (a["state"], a))
            key = (a["id"], g["node"], g["index"], inst["start"], inst["width"])
            tc.assertNotIn(key, shown)
            shown.add(key)
        if whole:
            tc.assertEqual(len(g["instances"]), 1, "whole GPU shared: %r" % (g,))
        tc.assertEqual(g["whole_used"], whole, repr(g))
        nfree = g["memory_slices"] - bin(used).count("1")
        tc.assertEqual(g["free_slices"], nfree, "free_slices vs instances: %r" % (g,))
        mask = ((1 << g["memory_slices"]) - 1) & ~used
        tc.assertEqual(g["free_mask"], "0b" + format(mask, "0%db" % g["memory_slices"]),
                       "free_mask vs instances: %r" % (g,))
        if H100_PROFILES and g["model"] == "h100-80gb":
            tc.assertEqual(g["compute_used"], compute, "compute_used vs instances: %r" % (g,))
    want = set()
    for a in allocations:
        if a["state"] in HOLDING_STATES:
            for p in a["placement"]:
                want.add((a["id"], p["node"], p["gpu"], p["start"], p["width"]))
    tc.assertEqual(want - shown, set(), "slots of live allocations missing from /v1/gpus")
    tc.assertEqual(shown - want, set(), "instances on /v1/gpus that no live allocation holds")


# ---------------------------------------------------------------- running


def main(module_doc=None):
    """Runs the unittest cases of __main__; exit 0 pass, 1 fail, 77 when
    every test was skipped."""
    _parse_argv()
    install_signal_handlers()
    if not Binaries.isostackd or not os.path.exists(Binaries.isostackd):
        sys.stderr.write("usage: %s PATH/TO/isostackd [PATH/TO/isoctl]\n" % sys.argv[0])
        sys.exit(2)
    prog = unittest.main(module="__main__", exit=False, verbosity=2)
    res = prog.result
    reports = sanitizer_reports()
    for rep in reports:
        sys.stderr.write("FAIL (sanitizer): %s\n" % rep)
    _cleanup_all()
    if not res.wasSuccessful() or reports:
        sys.exit(1)
    if res.testsRun > 0 and len(res.skipped) == res.testsRun:
        sys.exit(SKIP_EXIT)
    sys.exit(0)
