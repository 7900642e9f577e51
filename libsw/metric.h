/* Internal layout of sw_metric, shared with the sliding view. */
#ifndef SW_METRIC_H
#define SW_METRIC_H

#include "metric_bucket.h"

struct sw_metric {
  sw_leap_array *la;     /* sw.metric or sw.metric.occupiable */
  sw_leap_array *future; /* occupiable only: the borrow array */
  sw__metric_cfg cfg;    /* ctx of la */
  sw__metric_cfg fcfg;   /* ctx of future (one stripe) */
};

/* Fill a record from a metric bucket. */
void sw__metric_record(const sw__metric_cfg *cfg, const void *bucket, int64_t start,
                       sw_metric_record *rec);

#endif /* SW_METRIC_H */
