with source as (

    select * from {{ ref('raw_products') }}

)

select
    product_id,
    product_name,
    category,
    list_price,
    unit_cost,
    coalesce(is_discontinued, false) as is_discontinued
from source
