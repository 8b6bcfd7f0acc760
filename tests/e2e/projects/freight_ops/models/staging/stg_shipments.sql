-- Service levels and statuses are typed in by hand at the hubs; normalise their case.
select
    shipment_id,
    account_id,
    origin_hub,
    destination_hub,
    origin_hub || '-' || destination_hub as lane,
    shipped_at,
    cast(shipped_at as date) as ship_date,
    cast(shipped_at as date) + promised_transit_days as promised_date,
    delivered_at,
    cast(delivered_at as date) as delivery_date,
    lower(service_level) as service_level,
    weight_kg,
    lower(shipment_status) as shipment_status
from {{ ref('raw_shipments') }}
