/* fuzz_api.c: the REST API in-process, through api_handle_raw() (the same
 * parse/route/auth/handler/reply path a libmicrohttpd request takes, without
 * a socket): routing, query strings, headers and JSON bodies. One controller
 * over examples/cluster.yaml and a SQLite store in a temporary directory is
 * opened once, with a cluster-admin token, a tenant-user token of tenant
 * "acme" and a node-agent token of node gpu-a01, so inputs reach the
 * handlers behind authentication (the agents' routes as a real agent calls
 * them: its desired state, status and faults, docs/agents.md).
 *
 * An input is a request in a small text form:
 *   METHOD TARGET\n
 *   Name: value\n          (any number of header lines)
 *   \n
 *   body
 * In a header value (or a login form's body) "@admin", "@user", "@agent" and
 * "@neutron" stand for the tokens' secrets; Neutron project "p1" is mapped to
 * acme (docs/openstack.md).
 * The store keeps what earlier inputs created, so state carries over between
 * inputs (as it does in a daemon); a crash found late may need its
 * predecessors to reproduce. Every answer must be a status with a JSON body
 * (none for 204). */
#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <sodium.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/internal.h"
#include "fuzz.h"
#include "isostack/controller.h"
#include "isostack/inventory.h"
#include "isostack/sched.h"
#include "isostack/store.h"

#define MAX_HEADERS 80

/* The harness's one controller: test code, opened once for the whole run. */
static struct {
	char dir[64];
	struct iso_inventory *inv;
	struct iso_store *store;
	struct iso_controller *ctl;
	char admin[256], user[256], agent[256], neutron[256];
} fz;

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void cleanup(void)
{
	if (fz.ctl)
		iso_controller_free(fz.ctl);
	if (fz.store)
		iso_store_close(fz.store);
	if (fz.inv)
		iso_inventory_free(fz.inv);
	if (fz.dir[0])
		nftw(fz.dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}

static void die(const char *what, const struct iso_error *err)
{
	fprintf(stderr, "fuzz_api: %s: %s\n", what, err ? err->message : strerror(errno));
	abort();
}

static int call(const char *method, const char *target, const char *bearer, const char *body,
                int *status, char **reply)
{
	char auth[300];
	struct api_raw_header h[2] = {{"Authorization", auth},
	                              {"Content-Type", "application/json"}};

	snprintf(auth, sizeof(auth), "Bearer %s", bearer);
	return api_handle_raw(fz.ctl, method, target, h, 2, body, body ? strlen(body) : 0, status,
	                      reply);
}

/* POST /v1/tokens `body` as the admin; the secret goes to `out`. */
static void make_token(const char *body, char *out, size_t size)
{
	_cleanup_free_ char *tok = NULL;
	int status;

	if (call("POST", "/v1/tokens", fz.admin, body, &status, &tok) < 0 || status != 201)
		die(tok ? tok : "POST /v1/tokens", NULL);
	json_t *o = json_loads(tok, 0, NULL);
	const char *secret = json_string_value(json_object_get(o, "token"));
	if (!secret)
		die("no token in the reply", NULL);
	snprintf(out, size, "%s", secret);
	json_decref(o);
}

/* POST /v1/tenants acme, then a tenant-user token for it; a node-agent
 * token of gpu-a01. */
static void make_user(void)
{
	_cleanup_free_ char *reply = NULL;
	int status;

	if (call("POST", "/v1/tenants", fz.admin, "{\"name\":\"acme\"}", &status, &reply) < 0 ||
	    status != 201)
		die(reply ? reply : "POST /v1/tenants", NULL);
	make_token("{\"role\":\"tenant-user\",\"tenant\":\"acme\",\"user\":\"alice\"}", fz.user,
	           sizeof(fz.user));
	make_token("{\"role\":\"node-agent\",\"node\":\"gpu-a01\"}", fz.agent, sizeof(fz.agent));
	/* OpenStack's mlnx_sdn_assist driver (docs/openstack.md): its token,
	 * and Neutron project "p1" mapped to acme */
	make_token("{\"role\":\"neutron\",\"user\":\"neutron-fz\"}", fz.neutron,
	           sizeof(fz.neutron));
	free(reply);
	reply = NULL;
	if (call("PUT", "/v1/neutron/projects/p1", fz.admin, "{\"tenant\":\"acme\"}", &status,
	         &reply) < 0 ||
	    status != 200)
		die(reply ? reply : "PUT /v1/neutron/projects/p1", NULL);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct iso_error err = {0};
	char path[256];
	bool created;

	if (sodium_init() < 0)
		die("sodium_init", NULL);
	/* tmpfs when there is one: the store fsyncs every commit */
	snprintf(fz.dir, sizeof(fz.dir), "%s/isofuzz-api-XXXXXX",
	         access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (!mkdtemp(fz.dir))
		die(fz.dir, NULL);
	atexit(cleanup);
	if (iso_inventory_load_file(FUZZ_SOURCE_ROOT "/examples/cluster.yaml", &fz.inv, &err) < 0)
		die("inventory", &err);
	snprintf(path, sizeof(path), "%s/state.db", fz.dir);
	if (iso_store_open_sqlite(path, &fz.store, &err) < 0)
		die("store", &err);
	struct iso_controller_params params = {
	    .inv = fz.inv,
	    .store = fz.store,
	    .placer = iso_placer_find("isostack"),
	    .state_dir = fz.dir,
	    /* the tenant-user token sends millions of requests: the daemon's
	     * default rate would answer nearly all of them 429 before parsing */
	    .tenant_rates = {.writes_per_s = 1e9, .reads_per_s = 1e9},
	};
	if (iso_controller_open(&params, &fz.ctl, &err) < 0)
		die("controller", &err);
	if (iso_controller_bootstrap_admin(fz.ctl, fz.dir, false, &created, &err) < 0)
		die("admin token", &err);
	snprintf(path, sizeof(path), "%s/admin.token", fz.dir);
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	if (!f || !fgets(fz.admin, sizeof(fz.admin), f))
		die(path, NULL);
	fz.admin[strcspn(fz.admin, "\r\n")] = '\0';
	make_user();
	return 0;
}

/* "@admin" / "@user" / "@agent" in a header value become the tokens'
 * secrets. */
static char *expand(const char *v)
{
	const char *at = strchr(v, '@');
	const char *tok = NULL;
	size_t skip = 0;

	if (at && strncmp(at, "@admin", 6) == 0)
		tok = fz.admin, skip = 6;
	else if (at && strncmp(at, "@user", 5) == 0)
		tok = fz.user, skip = 5;
	else if (at && strncmp(at, "@agent", 6) == 0)
		tok = fz.agent, skip = 6;
	else if (at && strncmp(at, "@neutron", 8) == 0)
		tok = fz.neutron, skip = 8;
	if (!tok)
		return strdup(v);
	size_t pre = (size_t)(at - v), len = pre + strlen(tok) + strlen(at + skip) + 1;
	char *out = malloc(len);
	if (out)
		snprintf(out, len, "%.*s%s%s", (int)pre, v, tok, at + skip);
	return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct api_raw_header h[MAX_HEADERS];
	char *owned[MAX_HEADERS] = {0};
	size_t n = 0;
	int status = 0;
	_cleanup_free_ char *text = malloc(size + 1), *reply = NULL;
	char *line, *rest, *method, *target, *body;

	if (!text)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	/* the request line */
	rest = text;
	line = strsep(&rest, "\n");
	method = line;
	target = strchr(line, ' ');
	if (!target)
		return 0;
	*target++ = '\0';
	/* headers until an empty line; the rest is the body */
	while (rest && (line = strsep(&rest, "\n")) && line[0] && n < MAX_HEADERS) {
		char *colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon++ = '\0';
		if (*colon == ' ')
			colon++;
		owned[n] = expand(colon);
		if (!owned[n])
			break;
		h[n].name = line;
		h[n].value = owned[n];
		n++;
	}
	body = rest ? rest : "";
	size_t body_len = rest ? size - (size_t)(rest - text) : 0;
	/* a login form carries its token in the body */
	_cleanup_free_ char *form = NULL;
	if (strncmp(body, "username=", 9) == 0 && strlen(body) == body_len &&
	    (form = expand(body))) {
		body = form;
		body_len = strlen(form);
	}
	/* The harness's own tenant stays: without it most inputs would meet a
	 * 401 from the first such request on. */
	if (!(strcmp(method, "DELETE") == 0 && strncmp(target, "/v1/tenants/acme", 16) == 0)) {
		int r =
		    api_handle_raw(fz.ctl, method, target, h, n, body, body_len, &status, &reply);
		FUZZ_ASSERT(r == 0 || r == -ENOMEM, "api_handle_raw returned %d", r);
		if (getenv("FUZZ_VERBOSE")) /* for writing seeds: what each one got */
			fprintf(stderr, "fuzz_api: %s %s -> %d %s\n", method, target, status,
			        reply ? reply : "");
		if (r == 0) {
			FUZZ_ASSERT(status >= 200 && status <= 599, "status %d", status);
			if (status == 204) {
				FUZZ_ASSERT(!reply, "a 204 with a body");
			} else {
				json_error_t jerr;
				json_t *o = json_loads(reply, JSON_DECODE_ANY, &jerr);
				FUZZ_ASSERT(o, "status %d with a reply that is not JSON (%s): %s",
				            status, jerr.text, reply);
				FUZZ_ASSERT(status < 400 ||
				                json_is_object(json_object_get(o, "error")),
				            "error %d without an error object: %s", status, reply);
				json_decref(o);
			}
		}
	}
	for (size_t i = 0; i < n; i++)
		free(owned[i]);
	return 0;
}
