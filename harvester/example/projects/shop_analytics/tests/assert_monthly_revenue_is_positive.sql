-- Every customer-month in the revenue mart has at least one completed order, and a
-- completed order is never worth less than nothing.
select *
from {{ ref('customer_monthly_revenue') }}
where completed_orders < 1
    or revenue < 0
