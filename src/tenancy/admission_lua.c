/* admission_lua.c: site admission policies written in Lua 5.4, run in a
 * sandbox so that a policy can only look at the request and answer: a fresh
 * state per call with only base (no file access, no bytecode), string,
 * table and math; the request is a read-only table; memory is capped by the
 * allocator and CPU by an instruction-count hook. Everything runs under
 * lua_pcall, so a failing, slow or greedy script denies with a clear
 * message and never takes the daemon down. */
#include <errno.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "isostack/tenancy.h"

#define DEFAULT_MEMORY       (4u << 20)
#define DEFAULT_INSTRUCTIONS 1000000
#define HOOK_EVERY           1000

struct sandbox {
	size_t used, limit;
	bool out_of_memory;
	int64_t budget, spent;
	bool exhausted;
	const char *name, *src;
	size_t len;
	const struct iso_admission_request *req;
	/* The answer. */
	bool allow;
	char reason[ISO_DESC_MAX];
	bool bad_return;
};

static void *sandbox_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
	struct sandbox *s = ud;
	size_t old = ptr ? osize : 0;

	if (nsize == 0) {
		free(ptr);
		s->used -= old;
		return NULL;
	}
	if (nsize > old && s->used - old + nsize > s->limit) {
		s->out_of_memory = true;
		return NULL;
	}
	ptr = realloc(ptr, nsize);
	if (ptr)
		s->used = s->used - old + nsize;
	return ptr;
}

static void budget_hook(lua_State *L, lua_Debug *ar)
{
	struct sandbox *s;

	(void)ar;
	lua_getallocf(L, (void **)&s);
	s->spent += s->exhausted ? 1 : HOOK_EVERY;
	if (s->spent > s->budget) {
		if (!s->exhausted) {
			/* From now on every instruction fails, so a script that
			 * catches the error with pcall cannot go on. */
			s->exhausted = true;
			lua_sethook(L, budget_hook, LUA_MASKCOUNT, 1);
		}
		luaL_error(L, "instruction budget exceeded");
	}
}

/* load() for text chunks only, in the sandbox's globals. */
static int safe_load(lua_State *L)
{
	size_t len;
	const char *chunk = luaL_checklstring(L, 1, &len);
	const char *chunkname = luaL_optstring(L, 2, "=(load)");

	if (luaL_loadbufferx(L, chunk, len, chunkname, "t") != LUA_OK) {
		lua_pushnil(L);
		lua_insert(L, -2);
		return 2;
	}
	return 1;
}

static int readonly_newindex(lua_State *L)
{
	return luaL_error(L, "request is read-only");
}

static int readonly_pairs(lua_State *L)
{
	lua_getmetatable(L, 1);
	lua_getfield(L, -1, "__index");
	lua_getglobal(L, "next");
	lua_insert(L, -2);
	lua_pushnil(L);
	return 3;
}

static int readonly_len(lua_State *L)
{
	lua_getmetatable(L, 1);
	lua_getfield(L, -1, "__index");
	lua_pushinteger(L, (lua_Integer)luaL_len(L, -1));
	return 1;
}

/* Replaces the table on top of the stack by a read-only proxy of it. */
static void make_readonly(lua_State *L)
{
	lua_newtable(L);          /* data proxy */
	lua_createtable(L, 0, 5); /* data proxy mt */
	lua_pushvalue(L, -3);
	lua_setfield(L, -2, "__index");
	lua_pushcfunction(L, readonly_newindex);
	lua_setfield(L, -2, "__newindex");
	lua_pushcfunction(L, readonly_pairs);
	lua_setfield(L, -2, "__pairs");
	lua_pushcfunction(L, readonly_len);
	lua_setfield(L, -2, "__len");
	lua_pushboolean(L, 0);
	lua_setfield(L, -2, "__metatable"); /* getmetatable() cannot reach the data */
	lua_setmetatable(L, -2);
	lua_remove(L, -2);
}

static void push_request(lua_State *L, const struct iso_admission_request *r)
{
	lua_newtable(L);
	lua_pushstring(L, r->tenant ? r->tenant : "");
	lua_setfield(L, -2, "tenant");
	lua_createtable(L, r->n_tags, 0);
	for (int i = 0; i < r->n_tags; i++) {
		lua_pushstring(L, r->tags[i] ? r->tags[i] : "");
		lua_rawseti(L, -2, i + 1);
	}
	make_readonly(L);
	lua_setfield(L, -2, "tags");
	lua_pushinteger(L, r->members);
	lua_setfield(L, -2, "members");
	lua_newtable(L);
	lua_pushstring(L, r->gpus.profile ? r->gpus.profile : "");
	lua_setfield(L, -2, "profile");
	lua_pushinteger(L, r->gpus.count);
	lua_setfield(L, -2, "count");
	lua_pushboolean(L, r->gpus.whole);
	lua_setfield(L, -2, "whole");
	make_readonly(L);
	lua_setfield(L, -2, "gpus");
	lua_pushinteger(L, r->cpus);
	lua_setfield(L, -2, "cpus");
	lua_pushinteger(L, (lua_Integer)r->memory_mib);
	lua_setfield(L, -2, "memory_mib");
	lua_pushstring(L, iso_isolation_name(r->isolation));
	lua_setfield(L, -2, "isolation");
	make_readonly(L);
}

static void open_libs(lua_State *L)
{
	static const char *const unsafe[] = {"dofile",         "loadfile", "print",
	                                     "collectgarbage", "require",  "rawset",
	                                     "rawget",         "rawequal", "rawlen"};

	luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
	luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
	luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
	luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
	lua_pop(L, 4);
	for (size_t i = 0; i < ISO_ARRAY_SIZE(unsafe); i++) {
		lua_pushnil(L);
		lua_setglobal(L, unsafe[i]);
	}
	lua_pushcfunction(L, safe_load);
	lua_setglobal(L, "load");
	/* string.dump makes bytecode; nothing here may load it, drop it anyway. */
	lua_getglobal(L, LUA_STRLIBNAME);
	lua_pushnil(L);
	lua_setfield(L, -2, "dump");
	lua_pop(L, 1);
}

/* Everything that can raise a Lua error runs in here, under lua_pcall. */
static int run(lua_State *L)
{
	struct sandbox *s = lua_touserdata(L, 1);
	int top;

	open_libs(L);
	push_request(L, s->req);
	lua_pushvalue(L, -1);
	lua_setglobal(L, "request");
	top = lua_gettop(L) - 1;
	if (luaL_loadbufferx(L, s->src, s->len, lua_pushfstring(L, "=%s", s->name), "t") != LUA_OK)
		return lua_error(L);
	lua_remove(L, -2); /* the chunk name */
	lua_insert(L, -2); /* chunk request */
	lua_sethook(L, budget_hook, LUA_MASKCOUNT, HOOK_EVERY);
	lua_call(L, 1, LUA_MULTRET);
	lua_sethook(L, NULL, 0, 0);
	if (lua_gettop(L) == top || !lua_isboolean(L, top + 1)) {
		s->bad_return = true;
		return 0;
	}
	s->allow = lua_toboolean(L, top + 1);
	if (!s->allow && lua_gettop(L) >= top + 2 && lua_type(L, top + 2) == LUA_TSTRING)
		iso_strlcpy(s->reason, lua_tostring(L, top + 2), sizeof(s->reason));
	return 0;
}

int iso_admission_lua_eval(const char *name, const char *src, size_t len,
                           const struct iso_admission_request *req,
                           const struct iso_admission_limits *lim, struct iso_error *err)
{
	struct sandbox s = {
	    .limit = lim && lim->memory_bytes ? lim->memory_bytes : DEFAULT_MEMORY,
	    .budget = lim && lim->instructions > 0 ? lim->instructions : DEFAULT_INSTRUCTIONS,
	    .name = name,
	    .src = src,
	    .len = len,
	    .req = req,
	};
	char field[ISO_ERR_FIELD_MAX];
	char msg[ISO_DESC_MAX] = "";
	lua_State *L;
	int r;

	if (!name || !name[0] || !src || !req)
		return iso_error_set(err, ISO_E_INVALID, "policy",
		                     "policy without a name or source");
	snprintf(field, sizeof(field), "policy.%s", name);
	L = lua_newstate(sandbox_alloc, &s);
	if (!L)
		return iso_error_set(err, ISO_E_FORBIDDEN, field,
		                     "policy %s: could not start its sandbox", name);
	lua_pushcfunction(L, run);
	lua_pushlightuserdata(L, &s);
	r = lua_pcall(L, 1, 0, 0);
	/* Lua retries a failed allocation after a full collection, so only an
	 * error that escaped as LUA_ERRMEM means the cap was hit. */
	s.out_of_memory = r == LUA_ERRMEM;
	if (r != LUA_OK && !s.exhausted && !s.out_of_memory) {
		const char *m = lua_tostring(L, -1);
		iso_strlcpy(msg, m ? m : "error object is not a string", sizeof(msg));
	}
	lua_close(L);
	/* A script that caught the error and went on is still over its budget. */
	if (s.exhausted)
		return iso_error_set(err, ISO_E_FORBIDDEN, field,
		                     "policy %s: exceeded its instruction budget (%lld)", name,
		                     (long long)s.budget);
	if (s.out_of_memory)
		return iso_error_set(err, ISO_E_FORBIDDEN, field,
		                     "policy %s: exceeded its memory limit (%zu bytes)", name,
		                     s.limit);
	if (r != LUA_OK)
		return iso_error_set(err, ISO_E_FORBIDDEN, field, "policy %s: error: %s", name,
		                     msg);
	if (s.bad_return)
		return iso_error_set(err, ISO_E_FORBIDDEN, field,
		                     "policy %s: must return true, or false and a reason", name);
	if (!s.allow)
		return iso_error_set(err, ISO_E_FORBIDDEN, field, "policy %s: %s", name,
		                     s.reason[0] ? s.reason : "denied (no reason given)");
	return 0;
}
