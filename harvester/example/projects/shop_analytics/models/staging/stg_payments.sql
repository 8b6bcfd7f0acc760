with source as (

    select * from {{ ref('raw_payments') }}

)

select
    payment_id,
    order_id,
    customer_id,
    payment_method,
    payment_status,
    amount,
    paid_at,
    cast(paid_at as date) as paid_date
from source
