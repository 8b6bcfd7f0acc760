with source as (

    select * from {{ ref('raw_order_items') }}

)

select
    order_id,
    line_number,
    product_id,
    quantity,
    unit_price,
    coalesce(discount_amount, 0) as discount_amount,
    {{ line_net_amount('quantity', 'unit_price', 'discount_amount') }} as net_amount
from source
