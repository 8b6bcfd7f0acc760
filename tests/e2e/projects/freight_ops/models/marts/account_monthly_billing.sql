-- What each account was invoiced per calendar month of shipping, over how many
-- shipments and lanes.
select
    account_id,
    date_trunc('month', ship_date) as billing_month,
    count(*) as shipments,
    count(distinct lane) as lanes_used,
    sum(invoiced_amount) as invoiced_amount,
    max(weight_kg) as heaviest_shipment_kg
from {{ ref('fct_shipments') }}
group by all
