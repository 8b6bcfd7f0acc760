-- One row per real customer (test accounts excluded; an unknown test flag counts
-- as a real customer), with their order history and a value segment.
with customers as (

    select * from {{ ref('stg_customers') }}
    where is_test_account is not true

),

order_history as (

    select
        customer_id,
        min(order_date) as first_order_date,
        max(order_date) as last_order_date,
        count(*) as orders_placed,
        sum(case when status = 'completed' then order_amount else 0 end) as lifetime_revenue
    from {{ ref('fct_orders') }}
    group by customer_id

)

select
    customers.customer_id,
    customers.customer_name,
    customers.email,
    customers.country_code,
    customers.signup_date,
    customers.is_marketing_opt_in,
    order_history.first_order_date,
    order_history.last_order_date,
    coalesce(order_history.orders_placed, 0) as orders_placed,
    coalesce(order_history.lifetime_revenue, 0) as lifetime_revenue,
    {{ shop_calendar.days_between('order_history.last_order_date', 'current_date') }} as days_since_last_order,
    case
        when order_history.customer_id is null then 'prospect'
        when order_history.lifetime_revenue >= 250 then 'high_value'
        when order_history.lifetime_revenue > 0 then 'returning'
        else 'no_revenue'
    end as customer_segment
from customers
left join order_history
    on customers.customer_id = order_history.customer_id
