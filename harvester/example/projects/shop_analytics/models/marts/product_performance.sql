-- One row per catalogue product: units and revenue from completed orders, how many
-- distinct customers bought it, and the gross margin it earned.
with completed_lines as (

    select
        order_items.product_id,
        order_items.quantity,
        order_items.net_amount,
        orders.customer_id
    from {{ ref('stg_order_items') }} as order_items
    inner join {{ ref('fct_orders') }} as orders
        on order_items.order_id = orders.order_id
    where orders.status = 'completed'

),

sales as (

    select
        product_id,
        sum(quantity) as units_sold,
        sum(net_amount) as revenue,
        count(distinct customer_id) as buyers
    from completed_lines
    group by product_id

)

select
    products.product_id,
    products.product_name,
    products.category,
    products.is_discontinued,
    coalesce(sales.units_sold, 0) as units_sold,
    coalesce(sales.revenue, 0) as revenue,
    coalesce(sales.buyers, 0) as buyers,
    coalesce(sales.units_sold, 0) * products.unit_cost as cost_of_goods,
    {{ shop_utils.margin_pct('coalesce(sales.revenue, 0)', 'coalesce(sales.units_sold, 0) * products.unit_cost') }} as margin_pct
from {{ ref('stg_products') }} as products
left join sales
    on products.product_id = sales.product_id
