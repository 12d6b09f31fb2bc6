/* opafm_driver.c: the Omni-Path driver. It renders the intent as opafm.xml
 * and replaces inv->fabric.opafm_file whole (temp, fsync, rename), so the FM
 * never reads half a file.
 *
 * Honest limits: no fabric manager runs beside isostack here, so nothing
 * can be read back. A successfully written file is counted as confirmed;
 * that means "the file holds this generation", not "the fabric does".
 * Telling the FM to reload (opafmctrl / systemctl reload opafm) and reading
 * P_Key tables back through it is not done, and snapshot() says so rather
 * than pretending. */
#include <errno.h>
#include <string.h>

#include "isostack/fabric.h"

struct opafm_driver {
	struct iso_fabric_driver base;
	char path[512];
	struct iso_fabric_status st;
};

static int opafm_apply(struct iso_fabric_driver *d, const struct iso_fabric_intent *in,
                       struct iso_error *err)
{
	struct opafm_driver *o = (struct opafm_driver *)d;
	_cleanup_free_ char *xml = NULL;

	int r = iso_opafm_render(in, &xml, err);
	if (r < 0)
		return r;
	r = iso_file_write_atomic(o->path, xml, strlen(xml), 0644, false, err);
	if (r < 0)
		return r;
	o->st.applied = in->generation;
	o->st.confirmed = in->generation; /* written, not read back: see the top */
	o->st.incident = false;
	o->st.incident_msg[0] = '\0';
	return 0;
}

static int opafm_poll(struct iso_fabric_driver *d, struct iso_fabric_status *st)
{
	*st = ((struct opafm_driver *)d)->st;
	return 0;
}

static int opafm_snapshot(struct iso_fabric_driver *d, struct iso_fabric_snapshot *out,
                          struct iso_error *err)
{
	iso_error_set(err, ISO_E_UNAVAILABLE, "fabric.driver",
	              "the opafm driver cannot read P_Key tables back: no fabric manager "
	              "interface is wired in (it only writes %s)",
	              ((struct opafm_driver *)d)->path);
	return -EOPNOTSUPP;
}

static void opafm_free(struct iso_fabric_driver *d)
{
	free(d);
}

static const struct iso_fabric_driver_ops opafm_ops = {
    .name = "opafm",
    .apply = opafm_apply,
    .poll = opafm_poll,
    .snapshot = opafm_snapshot,
    .free = opafm_free,
};

int iso_fabric_opafm_driver_new(const struct iso_inventory *inv, struct iso_fabric_driver **out,
                                struct iso_error *err)
{
	if (!inv->fabric.opafm_file[0])
		return iso_error_set(err, ISO_E_INVALID, "fabric.opafm_file",
		                     "the opafm driver needs fabric.opafm_file (where opafm.xml "
		                     "is written)");
	struct opafm_driver *o = calloc(1, sizeof(*o));
	if (!o)
		return iso_error_set(err, ISO_E_INTERNAL, "", "out of memory");
	o->base.ops = &opafm_ops;
	iso_sm_health_set(&o->st.sm, ISO_SM_STATE_UNKNOWN,
	                  "the opafm driver cannot tell whether the fabric manager runs",
	                  iso_now_ms());
	iso_strlcpy(o->path, inv->fabric.opafm_file, sizeof(o->path));
	*out = &o->base;
	return 0;
}
