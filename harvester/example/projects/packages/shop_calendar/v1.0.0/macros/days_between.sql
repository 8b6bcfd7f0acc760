{#- Whole days from start_date to end_date (positive when end_date is later). -#}
{% macro days_between(start_date, end_date) -%}
    date_diff('day', cast({{ start_date }} as date), cast({{ end_date }} as date))
{%- endmacro %}
