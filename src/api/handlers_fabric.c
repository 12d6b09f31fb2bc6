/* handlers_fabric.c: the fabric for cluster-admins and auditors: the
 * driver's progress, the intent it programs, and a live verification that
 * reads every reachable port's P_Key table (docs/fabric.md), off the
 * daemon's loop thread (api_defer); and for node agents too, whether the
 * subnet manager is reachable (GET /v1/fabric/health, the CNI STATUS). */
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

int api_fabric_health(struct api_request *r)
{
	json_t *out = NULL;

	if (api_check_query(r, NULL) < 0 ||
	    iso_controller_fabric_health(r->ctl, &r->who, &out, &r->err) < 0)
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

/* On the worker thread: read the fabric (blocking), nothing else. */
static void verify_work(struct api_request *r, void *arg)
{
	(void)r;
	iso_fabric_verify_job_run(arg);
}

/* Back on the loop thread: judge and record the result. */
static void verify_done(struct api_request *r, void *arg)
{
	struct iso_fabric_verify_job *job = arg;
	struct iso_fabric_report rep;
	json_t *out = NULL;

	if (iso_controller_fabric_verify_end(r->ctl, &r->who, job, &rep, &r->err) == 0) {
		out = iso_fabric_report_to_json(&rep);
		iso_fabric_report_clear(&rep);
		if (!out)
			iso_error_set(&r->err, ISO_E_INTERNAL, NULL, "report encoding failed");
	}
	iso_fabric_verify_job_free(job);
	if (out)
		api_reply(r, MHD_HTTP_OK, out);
}

int api_fabric_verify(struct api_request *r)
{
	struct iso_fabric_verify_job *job = NULL;
	int ret;

	if (api_check_query(r, NULL) < 0 ||
	    iso_controller_fabric_verify_begin(r->ctl, &r->who, &job, &r->err) < 0)
		return -1;
	ret = api_defer(r, verify_work, verify_done, job);
	if (ret < 0)
		iso_fabric_verify_job_free(job);
	return ret;
}
