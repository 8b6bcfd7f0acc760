-- Every delayed consignment is at least a day late.
select *
from {{ ref('delayed_shipments') }}
where days_late < 1
