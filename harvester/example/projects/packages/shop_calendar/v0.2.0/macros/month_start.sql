{#- The first day of the calendar month that contains a date or timestamp, as a date. -#}
{% macro month_start(date_expr) -%}
    {{ return(adapter.dispatch('month_start', 'shop_calendar')(date_expr)) }}
{%- endmacro %}

{% macro default__month_start(date_expr) -%}
    cast(date_trunc('month', {{ date_expr }}) as date)
{%- endmacro %}
