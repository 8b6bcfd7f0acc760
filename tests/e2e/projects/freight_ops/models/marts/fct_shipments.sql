-- Every shipment that moved (cancelled ones are dropped) with its account, what was
-- invoiced for it on invoices that were not voided, and whether it arrived on time.
with shipments as (

    select * from {{ ref('stg_shipments') }}
    where shipment_status != 'cancelled'

),

invoiced as (

    select
        shipment_id,
        sum(base_charge + coalesce(fuel_surcharge, 0)) as invoiced_amount,
        count(*) as invoices
    from {{ ref('stg_invoices') }}
    where invoice_status != 'void'
    group by shipment_id

)

select
    shipments.shipment_id,
    shipments.account_id,
    accounts.region,
    accounts.is_key_account,
    shipments.lane,
    shipments.origin_hub,
    shipments.destination_hub,
    shipments.ship_date,
    shipments.promised_date,
    shipments.delivery_date,
    shipments.service_level,
    shipments.weight_kg,
    shipments.shipment_status,
    shipments.delivery_date - shipments.ship_date as transit_days,
    shipments.delivery_date <= shipments.promised_date as is_on_time,
    case
        when shipments.weight_kg >= 500 then 'heavy'
        when shipments.weight_kg >= 50 then 'medium'
        else 'light'
    end as weight_band,
    coalesce(invoiced.invoiced_amount, 0) as invoiced_amount
from shipments
inner join {{ ref('stg_accounts') }} as accounts
    on shipments.account_id = accounts.account_id
left join invoiced
    on shipments.shipment_id = invoiced.shipment_id
