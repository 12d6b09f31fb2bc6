/* handlers_fabric.c: the fabric for cluster-admins and auditors: the
 * driver's progress, the intent it programs, and a live verification that
 * reads every reachable port's P_Key table (docs/fabric.md). */
#include <jansson.h>

#include "api/internal.h"
#include "isostack/fabric.h"

int api_fabric_status(struct api_request *r)
{
	json_t *out = NULL;

	if (api_check_query(r, NULL) < 0 ||
	    iso_controller_fabric_status(r->ctl, &r->who, &out, &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_OK, out);
	return 0;
}

int api_fabric_intent(struct api_request *r)
{
	json_t *out = NULL;

	if (api_check_query(r, NULL) < 0 ||
	    iso_controller_fabric_intent(r->ctl, &r->who, &out, &r->err) < 0)
		return -1;
	api_reply(r, MHD_HTTP_OK, out);
	return 0;
}

int api_fabric_verify(struct api_request *r)
{
	struct iso_fabric_report rep;
	json_t *out;

	if (api_check_query(r, NULL) < 0 ||
	    iso_controller_fabric_verify(r->ctl, &r->who, &rep, &r->err) < 0)
		return -1;
	out = iso_fabric_report_to_json(&rep);
	iso_fabric_report_clear(&rep);
	if (!out)
		return iso_error_set(&r->err, ISO_E_INTERNAL, NULL, "report encoding failed");
	api_reply(r, MHD_HTTP_OK, out);
	return 0;
}
