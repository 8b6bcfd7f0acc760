-- Shipments still on the road after their promised day, most overdue first in the
-- ops view; key accounts get a call from their account manager.
select
    shipment_id,
    account_id,
    lane,
    service_level,
    promised_date,
    current_date - promised_date as days_late,
    case
        when is_key_account then 'call_account_manager'
        else 'send_email'
    end as follow_up
from {{ ref('fct_shipments') }}
where shipment_status = 'in_transit'
    and promised_date < current_date
