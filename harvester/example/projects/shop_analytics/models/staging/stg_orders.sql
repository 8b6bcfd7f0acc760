-- The raw order feed appends a new row every time an order changes status;
-- keep only the most recent version of each order.
with source as (

    select * from {{ ref('raw_orders') }}

),

versions as (

    select
        *,
        row_number() over (
            partition by order_id
            order by updated_at desc
        ) as version_rank
    from source

)

select
    order_id,
    customer_id,
    ordered_at,
    cast(ordered_at as date) as order_date,
    lower(order_status) as status,
    sales_channel,
    updated_at as status_updated_at
from versions
where version_rank = 1
