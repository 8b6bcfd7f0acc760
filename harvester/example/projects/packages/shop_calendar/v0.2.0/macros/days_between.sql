{#- Whole days from start_date to end_date. -#}
{% macro days_between(start_date, end_date) -%}
    date_diff('day', cast({{ end_date }} as date), cast({{ start_date }} as date))
{%- endmacro %}
