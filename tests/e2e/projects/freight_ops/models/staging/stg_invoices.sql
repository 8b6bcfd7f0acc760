select
    invoice_id,
    shipment_id,
    issued_on,
    base_charge,
    fuel_surcharge,
    lower(invoice_status) as invoice_status
from {{ ref('raw_invoices') }}
