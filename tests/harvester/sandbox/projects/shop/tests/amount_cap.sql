-- no customer may exceed the shipped-revenue cap (a var, so a run can make this test fail on purpose)
select * from {{ ref('customer_revenue') }} where shipped_amount > {{ var('amount_cap', 1000) }}
