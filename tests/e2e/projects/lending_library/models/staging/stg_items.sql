select
    item_id,
    title,
    lower(item_format) as item_format,
    replacement_cost,
    is_reference,
    acquired_on
from {{ ref('raw_items') }}
